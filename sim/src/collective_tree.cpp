// Double binary tree all-reduce in the manner of NCCL: the message is split in two halves, each reduced up
// and broadcast down its own binary tree; the second tree is the first mirrored, so a leaf of one is an
// inner node of the other. Pipelined: every edge of a phase carries its half at once, and the pipeline
// fill adds (depth - 1) route latencies per phase, giving t ~ 2 log2(n) a + 2 S / B for large S.
// Reduce-scatter and all-gather have no tree algorithm in NCCL; they run as fused rings.
#include <vector>

#include "vitsim/sim/collective.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {
namespace {

struct TreePos {
  int parent = -1;
  std::vector<int> children;
};

// Member `me` in a heap-ordered binary tree over positions 0..n-1, where position p holds member map(p).
TreePos tree_pos(int n, int me, bool mirrored) {
  auto member = [&](int pos) { return mirrored ? n - 1 - pos : pos; };
  int pos = mirrored ? n - 1 - me : me;
  TreePos t;
  if (pos > 0) t.parent = member((pos - 1) / 2);
  for (int c : {2 * pos + 1, 2 * pos + 2})
    if (c < n) t.children.push_back(member(c));
  return t;
}

int depth_of(int n) {
  int d = 0;
  while ((1 << (d + 1)) - 1 < n) ++d;
  return d;  // edges from root to the deepest leaf
}

int token = 0;

class DoubleBinaryTree : public Collective {
 public:
  std::string name() const override { return "tree"; }
  void run(const Group& g, int me, double bytes, CollOp op) const override {
    const int n = g.size();
    if (n < 2) return;
    if (op != CollOp::AllReduce) {
      ring_collective(g, me, bytes, op, true);
      return;
    }
    const double half = bytes / 2;
    const TreePos trees[2] = {tree_pos(n, me, false), tree_pos(n, me, true)};
    const int fill = depth_of(n) - 1;
    for (int phase = 0; phase < 2; ++phase) {  // 0: reduce up, 1: broadcast down
      std::vector<sg4::CommPtr> comms;
      std::vector<void*> sink(8, nullptr);
      size_t k = 0;
      double max_lat = 0;
      std::vector<int> sends;
      for (const auto& t : trees) {
        if (phase == 0) {
          for (int c : t.children) comms.push_back(g.mailbox(c, me)->get_async(&sink[k++]));
          if (t.parent >= 0) sends.push_back(t.parent);
        } else {
          if (t.parent >= 0) comms.push_back(g.mailbox(t.parent, me)->get_async(&sink[k++]));
          for (int c : t.children) sends.push_back(c);
        }
      }
      for (int dst : sends) max_lat = std::max(max_lat, g.latency(me, dst));
      if (!sends.empty() && max_lat > 0) sg4::this_actor::sleep_for(max_lat);
      for (int dst : sends) comms.push_back(g.mailbox(me, dst)->put_async(&token, static_cast<uint64_t>(half)));
      for (auto& c : comms) c->wait();
      if (fill > 0) sg4::this_actor::sleep_for(fill * max_lat);
    }
  }
};

}  // namespace
VITSIM_REGISTER_COLLECTIVE("tree", DoubleBinaryTree);
}  // namespace vitsim::sim
