#include "benchmarks/models/ssd_box.h"

#include <cmath>
#include <utility>
#include <vector>

namespace mlbench::bench::vision {

torch::Tensor ssd300_default_boxes() {
  const double fig = 300;
  const int feat[6] = {38, 19, 10, 5, 3, 1};
  const double steps[6] = {8, 16, 32, 64, 100, 300};
  const double scales[7] = {21, 45, 99, 153, 207, 261, 315};
  const std::vector<std::vector<double>> ratios{{2}, {2, 3}, {2, 3}, {2, 3}, {2}, {2}};
  std::vector<float> out;
  out.reserve(8732 * 4);
  for (int k = 0; k < 6; ++k) {
    const double fk = fig / steps[k];
    const double s1 = scales[k] / fig, s2 = scales[k + 1] / fig, s3 = std::sqrt(s1 * s2);
    std::vector<std::pair<double, double>> sizes{{s1, s1}, {s3, s3}};
    for (double a : ratios[k]) {
      sizes.emplace_back(s1 * std::sqrt(a), s1 / std::sqrt(a));
      sizes.emplace_back(s1 / std::sqrt(a), s1 * std::sqrt(a));
    }
    for (const auto& [w, h] : sizes) {
      for (int i = 0; i < feat[k]; ++i) {
        for (int j = 0; j < feat[k]; ++j) {
          out.push_back(static_cast<float>((j + 0.5) / fk));
          out.push_back(static_cast<float>((i + 0.5) / fk));
          out.push_back(static_cast<float>(w));
          out.push_back(static_cast<float>(h));
        }
      }
    }
  }
  const auto n = static_cast<std::int64_t>(out.size() / 4);
  return torch::from_blob(out.data(), {n, 4}, torch::kFloat32).clone().clamp_(0, 1);
}

torch::Tensor xywh_to_ltrb(const torch::Tensor& b) {
  auto xy = b.narrow(-1, 0, 2), wh = b.narrow(-1, 2, 2);
  return torch::cat({xy - wh / 2, xy + wh / 2}, -1);
}

torch::Tensor ltrb_to_xywh(const torch::Tensor& b) {
  auto lt = b.narrow(-1, 0, 2), rb = b.narrow(-1, 2, 2);
  return torch::cat({(lt + rb) / 2, rb - lt}, -1);
}

torch::Tensor box_iou(const torch::Tensor& a, const torch::Tensor& b) {
  auto lt = torch::max(a.narrow(1, 0, 2).unsqueeze(1), b.narrow(1, 0, 2).unsqueeze(0));
  auto rb = torch::min(a.narrow(1, 2, 2).unsqueeze(1), b.narrow(1, 2, 2).unsqueeze(0));
  auto wh = (rb - lt).clamp_min(0);
  auto inter = wh.select(2, 0) * wh.select(2, 1);
  auto area = [](const torch::Tensor& x) { return (x.select(1, 2) - x.select(1, 0)) * (x.select(1, 3) - x.select(1, 1)); };
  auto uni = area(a).unsqueeze(1) + area(b).unsqueeze(0) - inter;
  return inter / uni.clamp_min(1e-12);
}

BoxEncoder::BoxEncoder(torch::Tensor defaults, double iou_threshold, double scale_xy, double scale_wh)
    : defaults_(std::move(defaults)), threshold_(iou_threshold), scale_xy_(scale_xy), scale_wh_(scale_wh) {}

BoxTargets BoxEncoder::encode(const torch::Tensor& boxes, const torch::Tensor& labels) const {
  const auto d = defaults_.size(0);
  BoxTargets t;
  torch::Tensor matched_xywh = defaults_.clone();
  t.labels = torch::zeros({d}, torch::kInt64);
  if (boxes.size(0) > 0) {
    auto ious = box_iou(boxes, xywh_to_ltrb(defaults_));  // [G, D]
    auto [best_gt_iou, best_gt] = ious.max(0);             // per default box
    auto best_default = std::get<1>(ious.max(1));          // per ground truth
    // Every ground truth keeps its best default box (IoU forced above the threshold).
    best_gt_iou.index_fill_(0, best_default, 2.0);
    best_gt.index_put_({best_default}, torch::arange(boxes.size(0), torch::kInt64));
    auto mask = best_gt_iou > threshold_;
    auto idx = best_gt.index({mask});
    t.labels.index_put_({mask}, labels.to(torch::kInt64).index({idx}));
    matched_xywh.index_put_({mask}, ltrb_to_xywh(boxes.index({idx})));
  }
  auto dxy = defaults_.narrow(1, 0, 2), dwh = defaults_.narrow(1, 2, 2);
  auto gxy = (matched_xywh.narrow(1, 0, 2) - dxy) / dwh / scale_xy_;
  auto gwh = (matched_xywh.narrow(1, 2, 2) / dwh).log() / scale_wh_;
  t.offsets = torch::cat({gxy, gwh}, 1);
  return t;
}

torch::Tensor BoxEncoder::decode(const torch::Tensor& offsets) const {
  auto def = defaults_.to(offsets.device());
  auto dxy = def.narrow(1, 0, 2), dwh = def.narrow(1, 2, 2);
  auto xy = offsets.narrow(-1, 0, 2) * scale_xy_ * dwh + dxy;
  auto wh = (offsets.narrow(-1, 2, 2) * scale_wh_).exp() * dwh;
  return torch::cat({xy, wh}, -1);
}

torch::Tensor multibox_loss(const torch::Tensor& ploc, const torch::Tensor& pconf, const torch::Tensor& offsets,
                            const torch::Tensor& labels) {
  namespace F = torch::nn::functional;
  auto pos = labels > 0;                         // [N, D]
  auto pos_num = pos.sum(1);                     // [N]
  auto target = offsets.transpose(1, 2);         // [N, 4, D]
  auto sl1 = F::smooth_l1_loss(ploc, target, F::SmoothL1LossFuncOptions().reduction(torch::kNone)).sum(1);
  sl1 = (pos.to(sl1.dtype()) * sl1).sum(1);
  auto con = F::cross_entropy(pconf, labels, F::CrossEntropyFuncOptions().reduction(torch::kNone));  // [N, D]
  // Hard negatives: the 3 x positives highest-loss background boxes.
  auto con_neg = con.detach().masked_fill(pos, 0);
  auto order = std::get<1>(con_neg.sort(1, /*descending=*/true));
  auto rank = std::get<1>(order.sort(1));
  auto neg_num = torch::clamp_max(3 * pos_num, pos.size(1)).unsqueeze(-1);
  auto neg = rank < neg_num;
  auto closs = (con * (pos.to(con.dtype()) + neg.to(con.dtype()))).sum(1);
  auto total = sl1 + closs;
  auto has_pos = (pos_num > 0).to(total.dtype());
  return (total * has_pos / pos_num.to(total.dtype()).clamp_min(1e-6)).mean();
}

}  // namespace mlbench::bench::vision
