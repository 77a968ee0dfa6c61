// SSD300's boxes: the default (anchor) boxes of the MLPerf / NVIDIA SSD300
// reference, IoU, the encoder that matches ground truth to default boxes and
// turns them into regression targets, its inverse, and the multibox loss
// (smooth-L1 on matched boxes + cross-entropy with 3:1 hard-negative mining).
// Boxes are in relative image coordinates [0, 1].
#pragma once

#include <torch/torch.h>

namespace mlbench::bench::vision {

// The 8732 default boxes of SSD300 (fig 300, maps 38/19/10/5/3/1, steps
// 8/16/32/64/100/300, scales 21..315, aspect ratios 2 | 2,3), as [8732, 4]
// xywh (centre, width, height), clamped to [0, 1]; ordered per feature map,
// then per box shape, then row-major per cell (the order of the heads' output).
torch::Tensor ssd300_default_boxes();

// Corner form (left, top, right, bottom) <-> centre form (cx, cy, w, h).
torch::Tensor xywh_to_ltrb(const torch::Tensor& xywh);
torch::Tensor ltrb_to_xywh(const torch::Tensor& ltrb);

// Pairwise IoU of a [A, 4] and b [B, 4] (ltrb) -> [A, B].
torch::Tensor box_iou(const torch::Tensor& a, const torch::Tensor& b);

struct BoxTargets {
  torch::Tensor offsets;  // [D, 4]: regression targets against the default boxes
  torch::Tensor labels;   // [D] int64: 0 = background, else the matched box's label
};

class BoxEncoder {
 public:
  // `defaults`: [D, 4] xywh. Scales as the reference: xy 0.1, wh 0.2.
  explicit BoxEncoder(torch::Tensor defaults, double iou_threshold = 0.5, double scale_xy = 0.1,
                      double scale_wh = 0.2);

  // Ground truth boxes [G, 4] ltrb and labels [G] (>= 1) -> per-default-box
  // targets. Matching as the reference: each default box takes its best
  // ground truth when IoU > threshold, and every ground truth keeps its best
  // default box whatever the IoU. G == 0 gives all background.
  BoxTargets encode(const torch::Tensor& boxes_ltrb, const torch::Tensor& labels) const;
  // Offsets [.., D, 4] -> boxes xywh [.., D, 4] (the inverse of encode's regression).
  torch::Tensor decode(const torch::Tensor& offsets) const;

  const torch::Tensor& defaults() const { return defaults_; }

 private:
  torch::Tensor defaults_;
  double threshold_, scale_xy_, scale_wh_;
};

// The reference's loss. ploc [N, 4, D], pconf [N, C, D] (the model's output),
// target offsets [N, D, 4], labels [N, D]. Per image: (smooth-L1 over positive
// boxes + cross-entropy over positives and the 3x hardest negatives) / positives,
// averaged over images that have a positive.
torch::Tensor multibox_loss(const torch::Tensor& ploc, const torch::Tensor& pconf, const torch::Tensor& offsets,
                            const torch::Tensor& labels);

}  // namespace mlbench::bench::vision
