// `psflow run --emulate_network=RATE[,DELAY[,LOSS]]`: what each replica's emulated link is like,
// parsed from the flag, and the tc(8) qdiscs that give one direction of a link that shape.
//
//   RATE   a number with a unit of bits per second, decimal as tc's: kbit, mbit, gbit, tbit
//          ("100mbit", "1gbit", "2.5gbit"); from 1mbit to 400gbit.
//   DELAY  one-way delay added to every packet each way: a number with us, ms or s ("0.2ms",
//          "50us"); at most 10s.
//   LOSS   the share of packets dropped each way: a number with % ("0.1%"); below 100%.
// The rate is applied with tbf; a delay or a loss adds a netem qdisc with the tbf as its child
// (the kernel needs sch_netem for that).
#ifndef PSFLOW_OPERATOR_LOCAL_LINK_SHAPE_H_
#define PSFLOW_OPERATOR_LOCAL_LINK_SHAPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace psflow::local {

struct LinkShape {
  int64_t rate_bits_per_second = 0;
  absl::Duration delay = absl::ZeroDuration();  // zero: none
  double loss_percent = 0;                      // zero: none
  // The spec's parts as given, for messages: "1gbit", "0.2ms", "0.1%" (empty when absent).
  std::string rate_text, delay_text, loss_text;
};

// INVALID_ARGUMENT naming the part that is wrong and what was expected.
absl::StatusOr<LinkShape> ParseLinkShape(absl::string_view spec);

// "1gbit", "1gbit, 0.2ms delay", "25gbit, 1ms delay, 0.1% loss".
std::string DescribeLinkShape(const LinkShape& shape);

// The argument lists of the tc commands (after "tc -n NAMESPACE") that shape what `device`
// sends: one ("qdisc add dev D root tbf ...") for a rate alone, two (a netem root, then a tbf
// as its child) with a delay or a loss. Applied to both ends of a veth pair, they shape both
// directions of the link.
std::vector<std::vector<std::string>> QdiscCommands(const LinkShape& shape,
                                                    const std::string& device);

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_LINK_SHAPE_H_
