/* A generated platform built into SimGrid as one zone routed by arithmetic (see
 * platform_routed.h). SimGrid's own zones are C++ classes; this is one more, and the
 * only C++ in spsim: SimGrid 3.32 has no C interface for a zone's routing. */
#include "config.h"

#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/NetZone.hpp>

#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "platform_routed.h"
#include "spsim/error.h"
}

namespace {

namespace kr  = simgrid::kernel::routing;
namespace sg4 = simgrid::s4u;

/* sp_sim_routed_lean: routes for the engine's flows only (see DgxZone::lean_links) */
bool routed_lean = false;

/* One link as routes use it: its two directions (the same for a shared link). Latencies
 * are read when a route is asked for, never kept: spsim scales them between runs
 * (sg_link_set_latency, per direction). */
struct Hop {
  sg4::Link* up   = nullptr;
  sg4::Link* down = nullptr;
};

/* The whole platform as one zone. Host i is GPU i % zone_gpus of node zone
 * i / zone_gpus (the generator declares them node-major), and its netpoint's id is i:
 * the zone holds no other netpoint. */
class DgxZone : public kr::NetZoneImpl {
public:
  explicit DgxZone(const std::string& name) : kr::NetZoneImpl(name) {}

  sp_platform_shape shape{};
  std::vector<Hop> nvl, nic, rails, leaf, su_up, pod_spine, pod_up;
  Hop spine, core;
  sg4::Link* loopback = nullptr;

  /* The route SimGrid 3.32 finds from GPU a to GPU b when it parses the file, link for
   * link and in its order, with the latency summed in its order too (a sum of doubles
   * depends on it). SimGrid resolves a route between zones from the top
   * (NetZoneImpl::get_global_route_with_netzones): the route between the two SUs (or
   * pods) first, then the sender's side down to its SU's gateway, then the receiver's
   * side. A Dijkstra zone walks back from the destination and puts each hop's links in
   * front of the route, reversed (DijkstraZone::get_local_route, insert_link_latency);
   * a Floyd zone appends them. The top is a Dijkstra star of SUs (of pods, each a
   * Dijkstra star of SUs); node zones and their SU are Floyd zones; an SU zone holding
   * its nodes (shape.folded) is a Dijkstra zone, and because a route that stays in one
   * zone is resolved with the links gathered so far, the receiver's side goes to the
   * front of the whole route there. */
  void get_local_route(const kr::NetPoint* src, const kr::NetPoint* dst, kr::Route* route,
                       double* latency) override
  {
    const unsigned long a = src->id(), b = dst->id();
    std::vector<sg4::Link*> path, order; /* the route's links; the order of the latency sum */
    if (a == b) {
      if (loopback != nullptr)
        path = {loopback};
      order = path;
    } else if (a / (unsigned long)shape.zone_gpus == b / (unsigned long)shape.zone_gpus) {
      path  = {nvl[a].up, nvl[b].down};
      order = shape.folded ? std::vector<sg4::Link*>{nvl[b].down, nvl[a].up} : path;
    } else {
      cross_zones(a, b, path, order);
    }
    if (routed_lean) {
      lean_links(path, route);
    } else {
      for (sg4::Link* l : path)
        route->link_list_.push_back(l->get_impl());
    }
    if (latency != nullptr)
      for (const sg4::Link* l : order)
        *latency += l->get_latency();
  }

private:
  using Links = std::vector<sg4::Link*>;

  /* The links of @p path a flow's share can depend on: every shared link, and a FATPIPE
   * unless it is faster than the route's slowest shared link. A FATPIPE caps each flow
   * at its bandwidth and is shared by none, so one faster than a shared link on the
   * same route does not set that flow's max-min share: leaving it out of the max-min
   * system keeps the shares, and the system loses the leaf, spine and rail constraints
   * that every flow between nodes crossed (SimGrid's solver walks each constraint's
   * flows at every event). One exception, kept out of reach: SimGrid saturates a
   * FATPIPE when its fastest flow reaches the bandwidth and then fixes all of its
   * flows at one level weighted by their latencies (CM02's sharing penalty), so a
   * FATPIPE only as fast as the route's slowest link can set its flows' shares; such a
   * FATPIPE stays in the route (the generator makes every FATPIPE wider than a NIC,
   * platform_gen.c fat_bw, so it has none). Latencies are summed apart
   * (get_local_route), so no hop's latency is lost. Bandwidths are read now: spsim
   * rescales shared links between runs (sp_sim_coll_groups_time). */
  static void lean_links(const Links& path, kr::Route* route)
  {
    double slowest = -1.0; /* of the shared links; none: keep every link */
    for (const sg4::Link* l : path)
      if (l->get_sharing_policy() != sg4::Link::SharingPolicy::FATPIPE &&
          (slowest < 0 || l->get_bandwidth() < slowest))
        slowest = l->get_bandwidth();
    for (sg4::Link* l : path)
      if (slowest < 0 || l->get_sharing_policy() != sg4::Link::SharingPolicy::FATPIPE ||
          l->get_bandwidth() <= slowest)
        route->link_list_.push_back(l->get_impl());
  }

  static void append(Links& to, const Links& from) { to.insert(to.end(), from.begin(), from.end()); }

  void cross_zones(unsigned long a, unsigned long b, Links& path, Links& order) const
  {
    const unsigned long gz = (unsigned long)shape.zone_gpus, za = a / gz, zb = b / gz;
    const unsigned long per_nic = (unsigned long)shape.gpus_per_nic, nics = gz / per_nic;
    const unsigned long zs = (unsigned long)shape.zones_per_su, ua = za / zs, ub = zb / zs;
    sg4::Link* nic_a = nic[za * nics + (a % gz) / per_nic].up;
    sg4::Link* nic_b = nic[zb * nics + (b % gz) / per_nic].down;
    sg4::Link *rails_a = rails[za].up, *rails_b = rails[zb].up, *leaf_a = leaf[ua].up, *leaf_b = leaf[ub].up;
    /* each SU's side: the links, and their latencies in SimGrid's order */
    const Links src_side = {nic_a, rails_a, leaf_a}, dst_side = {rails_b, nic_b};
    const Links src_lat  = shape.folded ? Links{leaf_a, rails_a, nic_a} : Links{rails_a, leaf_a, nic_a};
    const Links dst_lat  = shape.folded ? Links{nic_b, rails_b} : Links{rails_b, nic_b};
    if (ua == ub) { /* one SU zone: one route of the SU's zone */
      path  = {nic_a, rails_a, leaf_a, rails_b, nic_b};
      order = shape.folded ? Links{nic_b, rails_b, leaf_a, rails_a, nic_a}
                           : Links{rails_a, leaf_a, rails_b, nic_a, nic_b};
      return;
    }
    /* between the SUs: top, then the pods' sides when the SUs are in two pods */
    const bool pods          = shape.pod_sus > 0;
    const unsigned long pa   = pods ? ua / (unsigned long)shape.pod_sus : 0;
    const unsigned long pb   = pods ? ub / (unsigned long)shape.pod_sus : 0;
    sg4::Link* hub           = pods ? pod_spine[pa].up : spine.up; /* the sender's SU's spine */
    sg4::Link *up_a = su_up[ua].up, *up_b = su_up[ub].down;
    Links middle, top_lat, src_up_lat, dst_down_lat;
    if (pa != pb) {
      middle       = {hub, up_a, core.up, pod_up[pa].up, pod_spine[pb].up, pod_up[pb].down, leaf_b, up_b};
      top_lat      = {pod_up[pb].down, pod_spine[pb].up, pod_up[pa].up, core.up};
      src_up_lat   = {up_a, hub};
      dst_down_lat = {up_b, leaf_b};
    } else {
      middle  = {hub, up_a, leaf_b, up_b};
      top_lat = {up_b, leaf_b, up_a, hub};
    }
    if (shape.folded) {
      path = dst_side;
      append(path, src_side);
    } else {
      path = src_side;
    }
    append(path, middle);
    if (!shape.folded)
      append(path, dst_side);
    order = top_lat;
    append(order, src_up_lat);
    append(order, src_lat);
    append(order, dst_down_lat);
    append(order, dst_lat);
  }
};

/* What the generator's sink fills. */
struct Build {
  DgxZone* zone = nullptr;
  sg4::NetZone* iface = nullptr;
};

void on_shape(void* ctx, const sp_platform_shape* s)
{
  auto* b         = static_cast<Build*>(ctx);
  b->zone->shape  = *s;
  const size_t gpus = (size_t)s->zones * (size_t)s->zone_gpus;
  b->zone->nvl.resize(gpus);
  b->zone->nic.resize((size_t)s->zones * (size_t)(s->zone_gpus / s->gpus_per_nic));
  b->zone->rails.resize((size_t)s->zones);
  b->zone->leaf.resize((size_t)s->sus);
  b->zone->su_up.resize((size_t)s->sus);
  if (s->pod_sus > 0) {
    const size_t pods = (size_t)((s->sus + s->pod_sus - 1) / s->pod_sus);
    b->zone->pod_spine.resize(pods);
    b->zone->pod_up.resize(pods);
  }
}

void on_zone_prop(void* ctx, const char* key, const char* value)
{
  static_cast<Build*>(ctx)->iface->set_property(key, value);
}

void on_host(void* ctx, int32_t zone, int32_t gpu, const char* id, const char* speed, const char* const* props)
{
  sg4::Host* h = static_cast<Build*>(ctx)->iface->create_host(id, std::string(speed));
  for (const char* const* p = props; p[0] != nullptr; p += 2)
    h->set_property(p[0], p[1]);
  h->seal();
}

void on_link(void* ctx, sp_plink_kind kind, int32_t index, int32_t sub, const char* id, const char* bandwidth,
             const char* latency, const char* policy)
{
  auto* b = static_cast<Build*>(ctx);
  Hop hop;
  if (std::strcmp(policy, "SPLITDUPLEX") == 0) {
    sg4::SplitDuplexLink* l = b->iface->create_split_duplex_link(id, std::string(bandwidth));
    l->set_latency(std::string(latency));
    l->seal();
    hop = {l->get_link_up(), l->get_link_down()};
  } else {
    sg4::Link* l = b->iface->create_link(id, std::string(bandwidth));
    l->set_latency(std::string(latency));
    l->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE);
    l->seal();
    hop = {l, l};
  }
  DgxZone* z       = b->zone;
  const size_t per = (size_t)(z->shape.zone_gpus / z->shape.gpus_per_nic);
  switch (kind) {
    case SP_PLINK_NVL:       z->nvl[(size_t)index * (size_t)z->shape.zone_gpus + (size_t)sub] = hop; break;
    case SP_PLINK_NIC:       z->nic[(size_t)index * per + (size_t)sub] = hop; break;
    case SP_PLINK_RAILS:     z->rails[(size_t)index] = hop; break;
    case SP_PLINK_LEAF:      z->leaf[(size_t)index] = hop; break;
    case SP_PLINK_SU_UP:     z->su_up[(size_t)index] = hop; break;
    case SP_PLINK_SPINE:     z->spine = hop; break;
    case SP_PLINK_POD_SPINE: z->pod_spine[(size_t)index] = hop; break;
    case SP_PLINK_POD_UP:    z->pod_up[(size_t)index] = hop; break;
    case SP_PLINK_CORE:      z->core = hop; break;
  }
}

} // namespace

extern "C" gboolean sp_sim_build_routed(const sp_platform_opts* opts, GError** err)
{
  Build b;
  /* the first zone created is the engine's root (NetZoneImpl's constructor) */
  b.zone  = new DgxZone("cluster");
  b.iface = b.zone->get_iface();
  const sp_platform_sink sink = {&b, on_shape, on_zone_prop, on_host, on_link};
  char* text = sp_platform_dgx_emit(opts, nullptr, nullptr, &sink, err);
  if (text == nullptr)
    return FALSE;
  g_free(text);
  /* a route from a GPU to itself crosses the network model's loopback, as in
   * SimGrid's own zones (none in CM02 without one) */
  if (sg4::Link* lo = sg4::Link::by_name_or_null("__loopback__"))
    b.zone->loopback = lo;
  b.iface->seal();
  return TRUE;
}

extern "C" gboolean sp_sim_routed_lean(gboolean on)
{
  const gboolean was = routed_lean ? TRUE : FALSE;
  routed_lean        = on != FALSE;
  return was;
}
