/* topology: being written */
