## tests: one GTest program per module, TAP output
