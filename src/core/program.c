/* program: being written */
