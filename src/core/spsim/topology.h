/* placeholder */
#ifndef SPSIM_TOPOLOGY_H
#define SPSIM_TOPOLOGY_H
#endif
