// The SimGrid S4U model of synchronous data-parallel ViT training.
//
// Per rank, two actors on the rank's GPU host: the compute stream (data wait, host->device copy, forward,
// backward, optimizer) and the communication stream (collectives, one at a time, in submission order,
// like an NCCL stream). Backward fills gradient buckets in reverse layer order; each full bucket goes to
// the communication stream at once when overlap is on, after backward when it is off.
#include "vitsim/sim/simulate.hpp"

#include <fmt/format.h>

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <memory>

#include "vitsim/core/memory.hpp"
#include "vitsim/core/identity.hpp"
#include "vitsim/core/units.hpp"
#include "vitsim/sim/collective.hpp"
#include "vitsim/sim/compute_model.hpp"

namespace sg4 = simgrid::s4u;

namespace vitsim::sim {

RankPlacement place_ranks(const Scenario& s, const PlatformFacts& facts) {
  std::vector<int> order;
  if (!s.cluster.hosts.empty()) {
    for (const auto& name : s.cluster.hosts) {
      auto it = std::find_if(facts.nodes.begin(), facts.nodes.end(), [&](const NodeFacts& n) { return n.name == name; });
      if (it == facts.nodes.end()) {
        std::string valid;
        for (const auto& n : facts.nodes) valid += (valid.empty() ? "" : ", ") + n.name;
        throw Error(s.origin_of("cluster.hosts"), fmt::format("cluster.hosts: no node '{}' in {}; nodes: {}", name, facts.path, valid));
      }
      order.push_back(static_cast<int>(it - facts.nodes.begin()));
    }
  } else {
    for (size_t i = 0; i < facts.nodes.size(); ++i) order.push_back(static_cast<int>(i));
  }
  if (s.cluster.nodes > static_cast<int>(order.size()))
    throw Error(s.origin_of("cluster.nodes"), fmt::format("cluster.nodes: {} nodes requested but {} has {}", s.cluster.nodes,
                                                          facts.path, order.size()));
  RankPlacement p;
  for (int k = 0; k < s.cluster.nodes; ++k) {
    const NodeFacts& n = facts.nodes[order[k]];
    if (s.cluster.gpus_per_node > static_cast<int>(n.gpus.size()))
      throw Error(s.origin_of("cluster.gpus_per_node"),
                  fmt::format("cluster.gpus_per_node: {} GPUs per node requested but node '{}' has {}",
                              s.cluster.gpus_per_node, n.name, n.gpus.size()));
    for (int gi = 0; gi < s.cluster.gpus_per_node; ++gi) {
      p.hosts.push_back(n.gpus[gi]);
      p.node.push_back(order[k]);
    }
  }
  return p;
}

void check_point(const Scenario& s, const PlatformFacts& facts) {
  place_ranks(s, facts);
  try {
    make_collective(s.parallel.collective);
  } catch (const Error& e) {
    throw Error(s.origin_of("parallelism.collective"), fmt::format("parallelism.collective: {}", e.what()));
  }
}

namespace {

struct CommJob {
  double bytes = 0;
  CollOp op = CollOp::AllReduce;
  std::string label;
  bool stop = false;
};

struct Totals {  // per rank, summed over measured steps
  Breakdown b;
};

// The DataLoader of one rank: W workers, each with `prefetch` batches in flight, delivering in order.
// Batch i is ready at max(ready[i-W], taken[i-W*prefetch]) + batch_time: a worker starts its next batch
// when it finished its previous one and the queue has room. Exact for PyTorch's in-order delivery.
class Loader {
 public:
  Loader(int workers, int prefetch, double batch_s) : w_(workers), cap_(workers * prefetch), batch_s_(batch_s) {}
  // Returns how long the trainer waits for its next batch at time `now`.
  double next(double now) {
    if (w_ == 0) return batch_s_;  // num_workers=0: the main process loads synchronously
    const size_t i = ready_.size();
    double start = 0;
    if (i >= static_cast<size_t>(w_)) start = std::max(start, ready_[i - w_]);
    if (i >= static_cast<size_t>(cap_)) start = std::max(start, taken_[i - cap_]);
    ready_.push_back(start + batch_s_);
    double wait = std::max(0.0, ready_.back() - now);
    taken_.push_back(now + wait);
    return wait;
  }
  bool synchronous() const { return w_ == 0; }

 private:
  int w_, cap_;
  double batch_s_;
  std::vector<double> ready_, taken_;
};

struct Bucket {
  int last_layer;  // backward closes this bucket after computing this layer (reverse order)
  double bytes;
};

struct RankState {
  int rank = 0;
  sg4::Host* host = nullptr;
  std::string device;
  std::vector<LayerTimes> layer_times;
  double optimizer_s = 0;
  double h2d_sleep_bw = 0;  // >0: copy time from a measured or pageable bandwidth instead of a transfer
  double h2d_private_s = -1;  // >=0: the copy path is one link private to this GPU: its exact time
  double h2d_latency_s = 0;   // route latency of a shared copy path, added before the transfer
  std::unique_ptr<Loader> loader;
  std::deque<CommJob> jobs;
  sg4::SemaphorePtr job_sem, done_sem;
  int outstanding = 0;
  std::vector<double> step_times;
  Totals totals;
  double comm_busy = 0;  // comm stream time during measured steps
  bool measuring = false;
};

struct Model {
  const Scenario& s;
  Workload w;
  std::unique_ptr<Collective> coll;
  std::unique_ptr<Group> group;
  // Patch (sequence) parallelism, DeepSpeed-Ulysses style: groups of `sp` consecutive ranks split each
  // image's tokens; before each attention layer an all-to-all turns the token split into a head split
  // (Q, K, V: 3 tensors), after it one all-to-all turns the output back (the same again in backward).
  int sp = 1;
  std::vector<std::unique_ptr<Group>> sp_groups;  // group r / sp holds rank r as member r % sp
  double a2a_bytes = 0;                           // bytes one rank holds of one [b, T/sp, d] tensor
  std::vector<RankState> ranks;
  std::vector<Bucket> grad_buckets;      // reverse order
  std::vector<double> gather_buckets;    // parameter all-gathers after the step (ZeRO-1/2)
  std::vector<std::pair<int, double>> z3_fwd_gathers;  // (first layer, bytes) per forward gather bucket
  std::vector<std::pair<int, double>> z3_bwd_gathers;  // (last layer in reverse order, bytes)
  double h2d_bytes = 0;
  int steps = 0, warmup = 0;
  bool want_trace = false;
  std::vector<TraceEvent> trace;

  explicit Model(const Scenario& sc) : s(sc), w(build_workload(sc.model)) {}

  void span(int rank, int track, const char* cat, std::string name, double start, double end) {
    if (want_trace && end > start) trace.push_back({std::move(name), cat, rank, track, start, end - start});
  }

  // Compute-stream time is accumulated and slept only when the rank must meet another actor (a
  // submission, a wait, a transfer): the same simulated times with a fraction of the events.
  struct LazyClock {
    double pending = 0;
    double now() const { return sg4::Engine::get_clock() + pending; }
    void advance(double dt) { pending += dt; }
    void flush() {
      if (pending > 0) sg4::this_actor::sleep_for(pending);
      pending = 0;
    }
  };

  // With overlap off and no ZeRO, the compute stream waits for every collective anyway: it runs them
  // itself, without a communication actor.
  bool inline_comm() const { return !s.parallel.overlap && s.parallel.zero == 0; }

  void run_job(RankState& r, const CommJob& job) {
    double t0 = sg4::Engine::get_clock();
    coll->run(*group, r.rank, job.bytes, job.op);
    double t1 = sg4::Engine::get_clock();
    if (r.measuring) r.comm_busy += t1 - t0;
    span(r.rank, 1, "comm", job.label, t0, t1);
  }

  void submit(RankState& r, CommJob job) {
    if (inline_comm()) {
      run_job(r, job);
      return;
    }
    r.jobs.push_back(std::move(job));
    r.outstanding++;
    r.job_sem->release();
  }
  // Waits for the oldest submitted collective.
  void wait_one(RankState& r) {
    r.done_sem->acquire();
    r.outstanding--;
  }
  // Waits for every submitted collective; returns the time spent waiting (exposed communication).
  double drain(RankState& r) {
    double t0 = sg4::Engine::get_clock();
    while (r.outstanding > 0) wait_one(r);
    return sg4::Engine::get_clock() - t0;
  }

  // One Ulysses all-to-all of `tensors` tensors of a2a_bytes each on this rank's compute stream (the
  // attention cannot start without it). Returns its duration.
  double ulysses_all_to_all(RankState& r, int tensors, const char* label) {
    const double t0 = sg4::Engine::get_clock();
    all_to_all(*sp_groups[r.rank / sp], r.rank % sp, tensors * a2a_bytes);
    const double t1 = sg4::Engine::get_clock();
    if (r.measuring) r.comm_busy += t1 - t0;
    span(r.rank, 1, "comm", label, t0, t1);
    return t1 - t0;
  }

  void comm_actor(RankState& r) {
    for (;;) {
      r.job_sem->acquire();
      CommJob job = std::move(r.jobs.front());
      r.jobs.pop_front();
      if (job.stop) return;
      run_job(r, job);
      r.done_sem->release();
    }
  }

  void compute_actor(RankState& r) {
    const int accum = s.training.grad_accum;
    const int n = group->size();
    const int zero = s.parallel.zero;
    const int L = static_cast<int>(w.layers.size());
    double fwd_total = 0;
    for (const auto& t : r.layer_times) fwd_total += t.fwd_s;
    LazyClock clk;
    for (int step = 0; step < steps; ++step) {
      r.measuring = step >= warmup;
      Breakdown b;
      const double t_step = clk.now();
      for (int m = 0; m < accum; ++m) {
        const bool boundary = m == accum - 1;
        // Data: wait for the loader's next batch.
        double t0 = clk.now();
        double wait = r.loader->next(t0);
        clk.advance(wait);
        b.data += wait;
        span(r.rank, 0, "data", "data", t0, clk.now());
        // Host -> device copy over the GPU's host link.
        t0 = clk.now();
        if (h2d_bytes > 0) {
          if (r.h2d_sleep_bw > 0) {
            clk.advance(h2d_bytes / r.h2d_sleep_bw);
          } else if (r.h2d_private_s >= 0) {
            clk.advance(r.h2d_private_s);
          } else {
            clk.advance(r.h2d_latency_s);
            clk.flush();
            sg4::Comm::sendto(r.host, r.host, static_cast<uint64_t>(h2d_bytes));
          }
        }
        b.h2d += clk.now() - t0;
        span(r.rank, 0, "data", "h2d", t0, clk.now());
        // Forward. ZeRO-3 gathers each bucket of parameters first (prefetched by the comm stream).
        t0 = clk.now();
        if (zero >= 3) {
          clk.flush();
          for (const auto& [first, bytes] : z3_fwd_gathers) submit(r, {bytes, CollOp::AllGather, "allgather(fwd)"});
          size_t gi = 0;
          for (int l = 0; l < L; ++l) {
            if (gi < z3_fwd_gathers.size() && z3_fwd_gathers[gi].first == l) {
              clk.flush();
              double tw = sg4::Engine::get_clock();
              wait_one(r);
              b.comm_exposed += sg4::Engine::get_clock() - tw;
              ++gi;
            }
            if (sp > 1 && w.layers[l].kind == LayerKind::Attention) {
              clk.flush();
              b.comm_exposed += ulysses_all_to_all(r, 3, "alltoall(qkv)");
              clk.advance(r.layer_times[l].fwd_s);
              clk.flush();
              b.comm_exposed += ulysses_all_to_all(r, 1, "alltoall(out)");
              continue;
            }
            clk.advance(r.layer_times[l].fwd_s);
          }
        } else if (sp > 1) {
          for (int l = 0; l < L; ++l) {
            if (w.layers[l].kind == LayerKind::Attention) {
              clk.flush();
              b.comm_exposed += ulysses_all_to_all(r, 3, "alltoall(qkv)");
              clk.advance(r.layer_times[l].fwd_s);
              clk.flush();
              b.comm_exposed += ulysses_all_to_all(r, 1, "alltoall(out)");
            } else {
              clk.advance(r.layer_times[l].fwd_s);
            }
          }
        } else {
          clk.advance(fwd_total);
        }
        b.compute_fwd += fwd_total;
        span(r.rank, 0, "compute", "fwd", t0, clk.now());
        // Backward, bucket by bucket in reverse layer order.
        const bool reduce_now = (boundary || zero >= 2) && n > 1;
        const CollOp op = zero == 0 ? CollOp::AllReduce : CollOp::ReduceScatter;
        std::vector<CommJob> held;
        if (zero >= 3) {
          clk.flush();
          for (const auto& [last, bytes] : z3_bwd_gathers) submit(r, {bytes, CollOp::AllGather, "allgather(bwd)"});
        }
        int layer = L - 1;
        size_t z3 = 0;
        for (size_t k = 0; k < grad_buckets.size(); ++k) {
          const Bucket& bk = grad_buckets[k];
          const double tb = clk.now();
          for (; layer >= bk.last_layer; --layer) {
            if (zero >= 3 && z3 < z3_bwd_gathers.size() && z3_bwd_gathers[z3].first == layer) {
              // Gathers were submitted before any reduction of this pass: the oldest job is this one.
              clk.flush();
              double tw = sg4::Engine::get_clock();
              wait_one(r);
              b.comm_exposed += sg4::Engine::get_clock() - tw;
              ++z3;
            }
            if (sp > 1 && w.layers[layer].kind == LayerKind::Attention) {
              // Backward mirrors forward: the output gradient back to a head split, then Q, K, V's
              // gradients back to the token split.
              clk.flush();
              b.comm_exposed += ulysses_all_to_all(r, 1, "alltoall(dout)");
              clk.advance(r.layer_times[layer].bwd_s);
              clk.flush();
              b.comm_exposed += ulysses_all_to_all(r, 3, "alltoall(dqkv)");
            } else {
              clk.advance(r.layer_times[layer].bwd_s);
            }
            b.compute_bwd += r.layer_times[layer].bwd_s;
          }
          span(r.rank, 0, "compute", fmt::format("bwd b{}", k), tb, clk.now());
          if (!reduce_now) continue;
          CommJob job{bk.bytes, op, fmt::format("{} b{}", coll_op_name(op), k)};
          if (s.parallel.overlap) {
            clk.flush();
            submit(r, std::move(job));
          } else {
            held.push_back(std::move(job));
          }
        }
        if (!held.empty() || r.outstanding > 0) {
          clk.flush();
          double tw = sg4::Engine::get_clock();
          for (auto& job : held) submit(r, std::move(job));
          b.comm_exposed += drain(r) + (inline_comm() ? sg4::Engine::get_clock() - tw : 0);
        }
      }
      // Optimizer: ZeRO-1+ updates this rank's partition only, then gathers the others' (ZeRO-1/2).
      double t0 = clk.now();
      double opt = r.optimizer_s;  // the compute model's step ops already update 1/n of the parameters under ZeRO
      clk.advance(opt);
      b.optimizer += opt;
      span(r.rank, 0, "optimizer", "optimizer", t0, clk.now());
      if ((zero == 1 || zero == 2) && n > 1) {
        clk.flush();
        for (double bytes : gather_buckets) submit(r, {bytes, CollOp::AllGather, "allgather(params)"});
        b.comm_exposed += drain(r);
      }
      const double dt = clk.now() - t_step;
      if (r.measuring) {
        r.step_times.push_back(dt);
        Breakdown& t = r.totals.b;
        t.data += b.data;
        t.h2d += b.h2d;
        t.compute_fwd += b.compute_fwd;
        t.compute_bwd += b.compute_bwd;
        t.optimizer += b.optimizer;
        t.comm_exposed += b.comm_exposed;
      }
    }
    clk.flush();
    if (!inline_comm()) submit(r, {0, CollOp::AllReduce, "", true});
  }
};

void configure_engine(sg4::Engine& e) {
  // The exact alpha-beta recipe (REFERENCE.md section 7): CM02 with unit factors, no cross-traffic,
  // no TCP window cap, plain max-min sharing.
  e.set_config("network/model:CM02");
  e.set_config("network/crosstraffic:0");
  e.set_config("network/TCP-gamma:0");
  e.set_config("network/latency-factor:1");
  e.set_config("network/bandwidth-factor:1");
  e.set_config("network/weight-S:0");
  e.set_config("contexts/stack-size:128");
  e.set_config("contexts/guard-size:0");
}

std::vector<Bucket> make_grad_buckets(const Workload& w, double elem_bytes, double bucket_bytes) {
  std::vector<Bucket> out;
  double acc = 0;
  for (int l = static_cast<int>(w.layers.size()) - 1; l >= 0; --l) {
    acc += w.layers[l].params * elem_bytes;
    if (acc >= bucket_bytes || l == 0) {
      out.push_back({l, acc});
      acc = 0;
    }
  }
  return out;
}

}  // namespace

double ulysses_tensor_bytes(const ViTConfig& model, int micro_batch, int sp, int elem_bytes) {
  return static_cast<double>(micro_batch) * model.tokens() / sp * model.width * elem_bytes;
}

SimResult simulate_point(const Scenario& s, const PlatformFacts& facts, const Calibration* calib, bool want_trace) {
  const RankPlacement place = place_ranks(s, facts);
  Model m(s);
  try {
    m.coll = make_collective(s.parallel.collective);
  } catch (const Error& e) {
    throw Error(s.origin_of("parallelism.collective"), fmt::format("parallelism.collective: {}", e.what()));
  }
  m.want_trace = want_trace;
  const int n = s.ranks();
  const int accum = s.training.grad_accum;
  const Precision prec = s.training.precision;
  const double grad_elem = precision_bytes(s.parallel.comm_dtype ? *s.parallel.comm_dtype : prec);
  const double param_elem = precision_bytes(prec);
  m.grad_buckets = make_grad_buckets(m.w, grad_elem, s.parallel.bucket_bytes);
  {
    const double total = m.w.total_params() * param_elem;
    const int k = static_cast<int>(std::ceil(total / s.parallel.allgather_bucket_bytes));
    for (int i = 0; i < k; ++i) m.gather_buckets.push_back(total / k);
    // ZeRO-3: forward gathers walk layers in order, backward in reverse, one bucket at a time.
    double acc = 0;
    int first = 0;
    for (int l = 0; l < static_cast<int>(m.w.layers.size()); ++l) {
      if (acc == 0) first = l;
      acc += m.w.layers[l].params * param_elem;
      if (acc >= s.parallel.allgather_bucket_bytes || l + 1 == static_cast<int>(m.w.layers.size())) {
        m.z3_fwd_gathers.push_back({first, acc});
        acc = 0;
      }
    }
    acc = 0;
    for (int l = static_cast<int>(m.w.layers.size()) - 1; l >= 0; --l) {
      if (acc == 0) m.z3_bwd_gathers.push_back({l, 0});
      acc += m.w.layers[l].params * param_elem;
      m.z3_bwd_gathers.back().second = acc;
      if (acc >= s.parallel.allgather_bucket_bytes) acc = 0;
    }
  }
  // The batch as the loader hands it over: float32 tensors at the model's input size.
  const double image_bytes = 4.0 * s.model.image_size * s.model.image_size * s.model.channels;
  m.h2d_bytes = s.training.micro_batch * image_bytes;

  // A sequence-parallel group shares its micro-batch: the sampler shards over data-parallel replicas.
  const int dp = s.dp_ranks();
  const long long train = s.dataset.effective_train_samples(dp);
  const long long per_rank = (train + dp - 1) / dp;  // DistributedSampler pads to equal shards
  const long long micro_batches = (per_rank + s.training.micro_batch - 1) / s.training.micro_batch;
  const long long steps_per_epoch = std::max(1LL, (micro_batches + accum - 1) / accum);
  bool full = s.simulation.full_epoch || steps_per_epoch <= s.simulation.steps;
  m.steps = full ? static_cast<int>(steps_per_epoch) : s.simulation.steps;
  m.warmup = m.steps > s.simulation.warmup ? s.simulation.warmup : 0;

  std::vector<std::string> notes;
  // Engine, platform, actors.
  std::vector<std::string> args_store{"vitsim", "--log=root.thres:critical"};
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer cannot follow SimGrid's raw context switches (false reports): use threads. The
  // factory is chosen when the engine starts, so it goes on the command line.
  args_store.push_back("--cfg=contexts/factory:thread");
#endif
  int argc = static_cast<int>(args_store.size());
  std::vector<char*> argv;
  for (auto& a : args_store) argv.push_back(a.data());
  argv.push_back(nullptr);
  sg4::Engine e(&argc, argv.data());
  configure_engine(e);
  e.load_platform(s.cluster.platform);
  for (auto& note : apply_link_transports(e, facts)) notes.push_back(std::move(note));  // before LatencyModel

  std::vector<sg4::Host*> hosts;
  for (const auto& name : place.hosts) {
    sg4::Host* h = e.host_by_name_or_null(name);
    if (!h) throw Error(fmt::format("{}: SimGrid has no host '{}' that the platform facts name", facts.path, name));
    hosts.push_back(h);
  }
  LatencyModel latency(e);
  m.group = std::make_unique<Group>("dp", hosts, place.node, latency);
  m.sp = s.parallel.sequence_parallel;
  if (m.sp > 1) {
    for (int g = 0; g < n / m.sp; ++g)
      m.sp_groups.push_back(std::make_unique<Group>(
          fmt::format("sp{}", g), std::vector<sg4::Host*>(hosts.begin() + g * m.sp, hosts.begin() + (g + 1) * m.sp),
          std::vector<int>(place.node.begin() + g * m.sp, place.node.begin() + (g + 1) * m.sp), latency));
    m.a2a_bytes = ulysses_tensor_bytes(s.model, s.training.micro_batch, m.sp, precision_bytes(prec));
    notes.push_back(fmt::format("patch parallelism over {} GPUs (Ulysses): {} all-to-alls of {} per rank per "
                                "micro-batch around the attention layers",
                                m.sp, 8 * s.model.depth, units::format_bytes(m.a2a_bytes)));
  }
  // The compute model per device type; with patch parallelism a rank computes 1/sp of every token-wise
  // layer (the head sees only the class token and runs whole).
  ComputeInputs compute_in;
  compute_in.precision = prec;
  // DeepSpeed's fp16/bf16 converts the model itself (module.half()); the others run torch.autocast.
  compute_in.autocast = s.training.framework != Framework::DeepSpeed;
  compute_in.step = StepInputs{s.training.framework, prec, s.training.optimizer, s.dp_ranks(), s.parallel.zero};
  compute_in.token_split = m.sp;
  std::map<std::string, std::unique_ptr<ComputeModel>> models;
  m.ranks.resize(n);
  MemoryBreakdown mem_max;
  bool fits = true;
  for (int r = 0; r < n; ++r) {
    RankState& rs = m.ranks[r];
    rs.rank = r;
    rs.host = hosts[r];
    const GpuFacts& g = facts.gpu.at(place.hosts[r]);
    const NodeFacts& node = facts.nodes[place.node[r]];
    rs.device = g.model;
    auto& cm = models[g.model];
    if (!cm) {
      cm = make_compute_model(m.w, compute_in, g, calib);
      notes.push_back(fmt::format("compute on {}: {}, {} framework step", g.model, cm->name(),
                                  framework_name(s.training.framework)));
      for (auto& line : cm->notes(s.training.micro_batch)) notes.push_back(std::move(line));
    }
    rs.layer_times = cm->layers(s.training.micro_batch);
    rs.optimizer_s = cm->optimizer_s();
    // Loader: measured images/s per worker, else the node's stated CPU figures.
    double per_image = 0;
    const LoaderCalibration* lc = calib ? calib->loader(s.dataset.name, s.model.image_size) : nullptr;
    if (lc)
      per_image = 1.0 / lc->images_per_s_per_worker;
    else if (node.loader_bw > 0 || node.loader_image_overhead > 0)
      per_image = node.loader_image_overhead + (node.loader_bw > 0 ? image_bytes / node.loader_bw : 0);
    const int workers_on_node = s.loader.workers * s.cluster.gpus_per_node;
    // One core per training process; loader workers share the rest.
    const int free_cores = std::max(1, node.cpu_cores - s.cluster.gpus_per_node);
    if (workers_on_node > free_cores) per_image *= static_cast<double>(workers_on_node) / free_cores;
    rs.loader = std::make_unique<Loader>(s.loader.workers, s.loader.prefetch, per_image * s.training.micro_batch);
    if (calib && calib->h2d_pinned_bw > 0 && s.loader.pinned) rs.h2d_sleep_bw = calib->h2d_pinned_bw;
    if (!s.loader.pinned) {
      double pageable = calib && calib->h2d_pageable_bw > 0 ? calib->h2d_pageable_bw : node.h2d_pageable_bw;
      rs.h2d_sleep_bw = pageable;  // 0: no pageable figure, the copy runs at the link's speed
    }
    {
      // A host->device path that is a single link of this GPU's own (the cluster loopback) shares with
      // nothing, so a transfer over it lasts exactly latency + bytes / bandwidth: skip the flow.
      std::vector<sg4::Link*> links;
      double ignored = 0;
      rs.host->route_to(rs.host, links, &ignored);
      const double lat = latency.route_latency(rs.host, rs.host);
      if (links.size() == 1 && links[0]->get_sharing_policy() == sg4::Link::SharingPolicy::FATPIPE)
        rs.h2d_private_s = lat + m.h2d_bytes / links[0]->get_bandwidth();
      else
        rs.h2d_latency_s = lat;
    }
    rs.job_sem = sg4::Semaphore::create(0);
    rs.done_sem = sg4::Semaphore::create(0);
    MemoryInputs mi;
    mi.micro_batch = s.training.micro_batch;
    mi.precision = prec;
    mi.zero_stage = s.parallel.zero;
    mi.dp_ranks = n;
    mi.bucket_bytes = s.parallel.bucket_bytes;
    mi.reserved_bytes = g.reserved_bytes;
    mi.optimizer = s.training.optimizer;
    mi.sequence_parallel = m.sp;
    MemoryBreakdown mb = memory_per_gpu(m.w, mi);
    if (mb.total() > g.mem_bytes) fits = false;
    if (mb.total() > mem_max.total()) mem_max = mb;
  }
  {
    const NodeFacts& node0 = facts.nodes[place.node[0]];
    if (!(calib && calib->loader(s.dataset.name, s.model.image_size)) && node0.loader_bw <= 0 && node0.loader_image_overhead <= 0)
      notes.push_back("data loading not modelled: no loader calibration and no loader_bw/loader_image_overhead in the platform");
  }
  for (int r = 0; r < n; ++r) {
    RankState* rs = &m.ranks[r];
    sg4::Actor::create(fmt::format("rank{}", r), rs->host, [&m, rs] { m.compute_actor(*rs); });
    if (!m.inline_comm()) sg4::Actor::create(fmt::format("comm{}", r), rs->host, [&m, rs] { m.comm_actor(*rs); });
  }
  e.run();
  const double end_time = sg4::Engine::get_clock();

  // Results.
  SimResult out;
  ReportPoint& p = out.point;
  p.params = s.params;
  p.scenario_id = scenario_id(s);  // the identity a report fed back in is checked against
  p.nodes = s.cluster.nodes;
  p.gpus = n;
  p.micro_batch = s.training.micro_batch;
  p.grad_accum = accum;
  p.params["nodes"] = std::to_string(p.nodes);
  p.params["gpus"] = std::to_string(p.gpus);
  p.params["micro_batch"] = std::to_string(p.micro_batch);
  p.params["grad_accum"] = std::to_string(p.grad_accum);
  p.global_batch = s.global_batch();
  p.steps_per_epoch = steps_per_epoch;
  const int measured = m.steps - m.warmup;
  std::vector<double> step_max(measured, 0.0);
  Breakdown mean;
  for (auto& rs : m.ranks) {
    for (int i = 0; i < measured; ++i) step_max[i] = std::max(step_max[i], rs.step_times[i]);
    RankReport rr;
    rr.rank = rs.rank;
    rr.host = rs.host->get_name();
    rr.device = rs.device;
    rr.step_time_s = step_stats(rs.step_times);
    Breakdown b = rs.totals.b;
    b.comm_total = rs.comm_busy;
    for (double* v : {&b.data, &b.h2d, &b.compute_fwd, &b.compute_bwd, &b.optimizer, &b.comm_total, &b.comm_exposed})
      *v /= measured;
    rr.breakdown_s = b;
    mean.data += b.data / n;
    mean.h2d += b.h2d / n;
    mean.compute_fwd += b.compute_fwd / n;
    mean.compute_bwd += b.compute_bwd / n;
    mean.optimizer += b.optimizer / n;
    mean.comm_total += b.comm_total / n;
    mean.comm_exposed += b.comm_exposed / n;
    p.per_rank.push_back(rr);
  }
  p.step_time_s = step_stats(step_max);
  p.breakdown_s = mean;
  p.bound = bound_of(mean);
  p.simulated_steps = m.steps;
  p.extrapolated = !full;
  const double exact_steps = static_cast<double>(micro_batches) / accum;
  p.epoch_time_s = full ? end_time : p.step_time_s.mean * exact_steps;
  p.throughput_img_s = p.step_time_s.mean > 0 ? p.global_batch / p.step_time_s.mean : 0;
  p.memory = mem_max;
  p.memory_per_gpu_bytes = mem_max.total();
  p.fits_in_memory = fits;
  if (full)
    notes.push_back("epoch simulated step by step");
  else
    notes.push_back(fmt::format("epoch time extrapolated from {} steady-state steps ({} warm-up steps excluded) to "
                                "the epoch's steps_per_epoch",
                                measured, m.warmup));
  if (!fits) notes.push_back("does not fit in GPU memory: predicted time is for a run that would fail");
  for (const auto& wi : s.what_ifs) notes.push_back("what-if: " + wi);
  p.notes = notes;
  out.trace = std::move(m.trace);
  return out;
}

}  // namespace vitsim::sim
