#include "config.h"
#include "sim.h"
int sp_sim_placeholder(void);
int sp_sim_placeholder(void) { return 0; }
