/* trace: being written */
