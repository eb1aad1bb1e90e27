/* reference: being written */
