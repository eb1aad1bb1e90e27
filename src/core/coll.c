/* coll: being written */
