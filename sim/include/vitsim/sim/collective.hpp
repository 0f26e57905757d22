#pragma once
// Collectives as SimGrid transfers over the platform's links. Each rank's actor calls run() on its own
// side (SPMD), so a collective's time is what the links and the other ranks make it.
// Adding a collective is adding one file that calls VITSIM_REGISTER_COLLECTIVE.
#include <simgrid/s4u.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace vitsim::sim {

enum class CollOp { AllReduce, ReduceScatter, AllGather };
const char* coll_op_name(CollOp op);

// The ranks taking part, in ring order, with mailboxes private to this group.
class Group {
 public:
  Group(std::string name, std::vector<simgrid::s4u::Host*> hosts, std::vector<int> node_of);
  int size() const { return static_cast<int>(hosts_.size()); }
  simgrid::s4u::Host* host(int i) const { return hosts_[i]; }
  int node_of(int i) const { return node_of_[i]; }
  // Mailbox carrying messages from member `src` to member `dst` (FIFO, so successive collectives pair up).
  simgrid::s4u::Mailbox* mailbox(int src, int dst) const;
  // Latency of the route between two members (cached).
  double latency(int src, int dst) const;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::vector<simgrid::s4u::Host*> hosts_;
  std::vector<int> node_of_;
  mutable std::vector<std::vector<double>> latency_cache_;
};

// A point-to-point exchange: send `bytes` to `to` and receive from `from`, both at once, then wait.
// `extra_latency_steps` adds that many route latencies (to `to`) after the transfer, so that one fused
// flow can stand for several latency-bound steps of the same algorithm.
void exchange(const Group& g, int me, int to, int from, double bytes, int extra_latency_steps = 0);

class Collective {
 public:
  virtual ~Collective() = default;
  virtual std::string name() const = 0;
  // Called by every member with the same arguments; returns when this member's part is done.
  virtual void run(const Group& g, int me, double bytes, CollOp op) const = 0;
};

using CollectiveFactory = std::function<std::unique_ptr<Collective>()>;
// Registry: a collective by name; an unknown name throws Error listing the valid ones.
std::unique_ptr<Collective> make_collective(const std::string& name);
std::vector<std::string> collective_names();
bool register_collective(const std::string& name, CollectiveFactory f);

#define VITSIM_REGISTER_COLLECTIVE(NAME, CLASS) \
  static const bool vitsim_registered_##CLASS = ::vitsim::sim::register_collective(NAME, [] { return std::make_unique<CLASS>(); })

// Ring building blocks shared by the ring, hierarchical and tree files.
// steps: reduce-scatter or all-gather phase of a ring over g: (n-1) steps of bytes/n.
void ring_phase(const Group& g, int me, double bytes, bool fused);
void ring_collective(const Group& g, int me, double bytes, CollOp op, bool fused);

}  // namespace vitsim::sim
