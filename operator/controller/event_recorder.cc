#include "operator/controller/event_recorder.h"

#include <utility>

#include "core/log.h"
#include "operator/controller/job_status.h"
#include "operator/kube/object_meta.h"

namespace psflow::controller {

EventRecorder::EventRecorder(kube::KubeClient& client, std::string component,
                             std::function<absl::Time()> now)
    : client_(client), component_(std::move(component)), now_(std::move(now)) {}

void EventRecorder::Record(const kube::Json& object, EventType type, const std::string& reason,
                           const std::string& message) {
  const std::string ns = kube::Namespace(object);
  const std::string stamp = FormatTimestamp(now_());
  kube::Json event = {{"apiVersion", "v1"},
                      {"kind", "Event"},
                      {"metadata", {{"generateName", kube::Name(object) + "."}, {"namespace", ns}}},
                      {"involvedObject",
                       {{"apiVersion", kube::TrainingJobs().ApiVersion()},
                        {"kind", kube::TrainingJobs().kind},
                        {"name", kube::Name(object)},
                        {"namespace", ns},
                        {"uid", kube::Uid(object)},
                        {"resourceVersion", kube::ResourceVersion(object)}}},
                      {"reason", reason},
                      {"message", message},
                      {"type", type == EventType::kNormal ? "Normal" : "Warning"},
                      {"source", {{"component", component_}}},
                      {"reportingComponent", component_},
                      {"firstTimestamp", stamp},
                      {"lastTimestamp", stamp},
                      {"count", 1}};
  absl::StatusOr<kube::Json> created = client_.Create(kube::Events(), ns, event);
  if (!created.ok()) {
    PSFLOW_LOG(WARNING) << "event " << reason << " for " << kube::Key(object)
                        << " not recorded: " << created.status().message();
    return;
  }
  ++recorded_;
}

}  // namespace psflow::controller
