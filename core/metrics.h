// The Prometheus endpoint every psflow process serves: GET /metrics (text exposition format
// 0.0.4 of `registry()`, serialised by prometheus-cpp), GET /healthz (200 "ok") and GET /readyz
// (200 "ok" while the readiness check passes, 503 with its reason otherwise; always ready when
// no check is set).
//
// Why not prometheus-cpp's Exposer: it serves from civetweb threads with a fixed ~100 KiB stack,
// and glibc carves each thread's static TLS out of that stack. OpenBLAS alone takes 60 KiB of
// TLS, so in the worker a scrape overflowed the stack and crashed the process. This server runs
// one ordinary thread (default stack) and answers one short request per connection. It reads
// the requests of up to 64 connections at once, each given 2 s from its accept to send its head
// (16 KiB at most) and 2 s to take the answer, so a client that stalls or trickles (or many of
// them) cannot keep /healthz from a liveness probe.
//
// Metric names follow psflow_<component>_<name>_<unit>[_total]; labels come from
// StandardLabels() and other small fixed sets, never step numbers.
#ifndef PSFLOW_CORE_METRICS_H_
#define PSFLOW_CORE_METRICS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace psflow {

using Labels = std::map<std::string, std::string>;

// {job, replica_type, replica_index} for this process: job from $PSFLOW_JOB_NAME ("local" when
// unset), the others from the task.
Labels StandardLabels(const std::string& replica_type, int replica_index);

// Registers one series of a new counter/gauge family in `registry` (which must outlive it).
prometheus::Counter& AddCounter(prometheus::Registry& registry, const std::string& name,
                                const std::string& help, const Labels& labels);
prometheus::Gauge& AddGauge(prometheus::Registry& registry, const std::string& name,
                            const std::string& help, const Labels& labels);

// A gauge whose series appears at its first Set: a figure that does not exist yet (a worker's
// loss before its first step, an evaluator's, the accuracy before training ends) is absent from
// /metrics rather than a 0 that dashboards would average in. Its family (HELP and TYPE) is
// registered at once. Set is thread-safe; Clear makes the series absent again (a figure that
// can no longer be measured), and must not run beside a Set.
class LateGauge {
 public:
  LateGauge(prometheus::Registry& registry, const std::string& name, const std::string& help,
            Labels labels);
  void Set(double value);
  void Clear();

 private:
  prometheus::Family<prometheus::Gauge>& family_;
  const Labels labels_;
  std::atomic<prometheus::Gauge*> gauge_{nullptr};
};

class MetricsEndpoint {
 public:
  // Listens on bind_address:port (IPv4; port 0 picks a free one) and serves from a background
  // thread until destroyed. UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const std::string& bind_address,
                                                                int port);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // Thread-safe, as prometheus-cpp's registry is; lives as long as the endpoint.
  prometheus::Registry& registry() { return registry_; }
  // Held by each scrape while it collects the registry. A writer of several series that must be
  // seen together (a step's examples and steps counters) holds it across them, so that no scrape
  // lands between two of them.
  std::mutex& collect_mutex() { return collect_mu_; }
  // OK when ready; the message of a non-OK status is served with the 503. Thread-safe; call
  // before the check's captures can dangle, e.g. set it back to nullptr before they go.
  void SetReadinessCheck(std::function<absl::Status()> check);
  int port() const { return port_; }

  // Scrapes of /metrics by a monitoring system (Prometheus): every one whose User-Agent is not
  // psflow's own (core/http_get.h: `psflow run`'s progress line, the operator's throughput
  // probe). MonitoringScrapes() counts those whose answer was collected so far (every one
  // counted after what it returns collected the registry after the call);
  // AwaitMonitoringScrape(seen, timeout) waits until one collected after the seen-th has been
  // sent whole, true when it was (false when `timeout` passed first). A process that sets its
  // last values and then waits this way is seen with them before it exits. Thread-safe; not
  // while holding collect_mutex().
  int64_t MonitoringScrapes();
  bool AwaitMonitoringScrape(int64_t seen, std::chrono::milliseconds timeout);

 private:
  MetricsEndpoint(int listen_fd, int port);
  // The endpoint's thread: reads the requests and writes their answers on up to 64
  // connections at once, each given 2 s from its accept to its request's end and 2 s more to
  // take the answer, so that no client, however slow, holds up the others. An answer waiting to
  // be taken is held whole: 64 clients that do not read hold up to 64 copies of /metrics for 2 s.
  void Serve();
  struct Reply {
    std::string data;    // the whole HTTP response
    int64_t scrape = 0;  // a monitoring scrape's number (scrapes_collected_): seen once all sent
  };
  // The answer to one whole request (its head read by Serve).
  Reply Answer(const std::string& request);

  prometheus::Registry registry_;
  std::mutex collect_mu_;  // held by the endpoint while it collects an answer (collect_mutex)
  std::mutex readiness_mu_;
  std::function<absl::Status()> readiness_ ABSL_GUARDED_BY(readiness_mu_);
  std::mutex scrapes_mu_;
  std::condition_variable scrape_sent_;
  int64_t scrapes_collected_ ABSL_GUARDED_BY(scrapes_mu_) = 0;  // monitoring scrapes
  int64_t scrapes_sent_ ABSL_GUARDED_BY(scrapes_mu_) = 0;       // of those, answered
  int listen_fd_;
  int port_;
  int wake_pipe_[2] = {-1, -1};  // written by the destructor to stop Serve()
  std::thread thread_;
};

}  // namespace psflow

#endif  // PSFLOW_CORE_METRICS_H_
