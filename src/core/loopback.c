/* loopback: being written */
