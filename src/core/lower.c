/* lower: being written */
