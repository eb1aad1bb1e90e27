/* SimGrid engine (placeholder header; replaced by the engine) */
#ifndef SPSIM_SIM_H
#define SPSIM_SIM_H
#endif
