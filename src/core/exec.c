/* exec: being written */
