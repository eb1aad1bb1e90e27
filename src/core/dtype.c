/* dtype: being written */
