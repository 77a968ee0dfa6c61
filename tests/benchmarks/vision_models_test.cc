// The image benchmarks' models against their published architectures: output
// shapes and parameter counts (torchvision / PyTorch examples / MLPerf values),
// SSD default boxes, IoU, box encoding round trip and matching, multibox loss.
#include <gtest/gtest.h>

#include "benchmarks/models/ssd_box.h"
#include "benchmarks/models/vision_models.h"

namespace v = mlbench::bench::vision;
using mlbench::bench::parameter_count;

namespace {

TEST(ResNet, ParameterCountsMatchTorchvision) {
  // torchvision.models.resnetXX(num_classes=1000): sum(p.numel() for p in m.parameters()).
  EXPECT_EQ(parameter_count(*v::ResNet(v::resnet_spec("resnet18"), 1000)), 11689512);
  EXPECT_EQ(parameter_count(*v::ResNet(v::resnet_spec("resnet34"), 1000)), 21797672);
  EXPECT_EQ(parameter_count(*v::ResNet(v::resnet_spec("resnet50"), 1000)), 25557032);
  EXPECT_EQ(parameter_count(*v::ResNet(v::resnet_spec("resnet101"), 1000)), 44549160);
}

TEST(ResNet, ClassesChangeOnlyTheClassifier) {
  // fc: 512*10+10 instead of 512*1000+1000.
  EXPECT_EQ(parameter_count(*v::ResNet(v::resnet_spec("resnet18"), 10)), 11689512 - 513000 + 5130);
}

TEST(ResNet, OutputShape) {
  torch::NoGradGuard g;
  v::ResNet m(v::resnet_spec("resnet18"), 7);
  m->eval();
  EXPECT_EQ(m->forward(torch::randn({2, 3, 64, 64})).sizes(), (std::vector<std::int64_t>{2, 7}));
  v::ResNet b(v::resnet_spec("resnet50"), 5);
  b->eval();
  EXPECT_EQ(b->forward(torch::randn({1, 3, 32, 32})).sizes(), (std::vector<std::int64_t>{1, 5}));
}

TEST(ResNet, UnknownArchNamesTheChoices) {
  try {
    v::resnet_spec("resnet19");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("resnet101"), std::string::npos);
  }
}

TEST(Dcgan, ParameterCountsMatchTheExample) {
  EXPECT_EQ(parameter_count(*v::DcganGenerator(100, 64, 3)), 3576704);
  EXPECT_EQ(parameter_count(*v::DcganDiscriminator(64, 3)), 2765568);
}

TEST(Dcgan, Shapes) {
  torch::NoGradGuard g;
  v::DcganGenerator gen;
  v::DcganDiscriminator disc;
  auto img = gen->forward(torch::randn({3, 100, 1, 1}));
  EXPECT_EQ(img.sizes(), (std::vector<std::int64_t>{3, 3, 64, 64}));
  EXPECT_LE(img.abs().max().item<float>(), 1.0f);  // tanh
  auto p = disc->forward(img);
  EXPECT_EQ(p.sizes(), (std::vector<std::int64_t>{3}));
  EXPECT_TRUE(((p > 0) & (p < 1)).all().item<bool>());  // sigmoid
}

TEST(Espcn, ParametersAndUpscaledShape) {
  // conv1 1*64*25+64, conv2 64*64*9+64, conv3 64*32*9+32, conv4 32*r^2*9+r^2.
  EXPECT_EQ(parameter_count(*v::Espcn(2)), 1664 + 36928 + 18464 + 1156);
  EXPECT_EQ(parameter_count(*v::Espcn(3)), 1664 + 36928 + 18464 + 2601);
  torch::NoGradGuard g;
  v::Espcn m(2);
  EXPECT_EQ(m->forward(torch::rand({2, 1, 17, 23})).sizes(), (std::vector<std::int64_t>{2, 1, 34, 46}));
}

TEST(Espcn, LumaOfGreyIsTheGrey) {
  auto grey = torch::full({1, 3, 2, 2}, 0.25f);
  EXPECT_NEAR(v::rgb_to_y(grey).max().item<float>(), 0.25f, 1e-6);
  EXPECT_EQ(v::rgb_to_y(grey).sizes(), (std::vector<std::int64_t>{1, 1, 2, 2}));
}

TEST(FastStyle, TransformerNetParametersAndShape) {
  EXPECT_EQ(parameter_count(*v::TransformerNet()), 1679235);
  torch::NoGradGuard g;
  v::TransformerNet m;
  EXPECT_EQ(m->forward(torch::rand({2, 3, 32, 48}) * 255).sizes(), (std::vector<std::int64_t>{2, 3, 32, 48}));
}

TEST(FastStyle, Vgg16FeaturesAreFrozenAndShaped) {
  v::Vgg16Features vgg;
  // torchvision vgg16().features has 14,714,688 parameters; the five conv5 ones
  // (3 x (512*512*9+512)) are past relu4_3 and not built.
  EXPECT_EQ(parameter_count(*vgg), 14714688 - 3 * (512 * 512 * 9 + 512));
  for (const auto& p : vgg->parameters()) EXPECT_FALSE(p.requires_grad());
  auto f = vgg->forward(torch::rand({1, 3, 64, 64}));
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].sizes(), (std::vector<std::int64_t>{1, 64, 64, 64}));
  EXPECT_EQ(f[1].sizes(), (std::vector<std::int64_t>{1, 128, 32, 32}));
  EXPECT_EQ(f[2].sizes(), (std::vector<std::int64_t>{1, 256, 16, 16}));
  EXPECT_EQ(f[3].sizes(), (std::vector<std::int64_t>{1, 512, 8, 8}));
}

TEST(FastStyle, GramMatrix) {
  auto y = torch::ones({2, 3, 4, 5});
  auto g = v::gram_matrix(y);
  EXPECT_EQ(g.sizes(), (std::vector<std::int64_t>{2, 3, 3}));
  EXPECT_NEAR(g[0][1][2].item<float>(), 20.0f / 60.0f, 1e-6);
}

TEST(Ssd, ParameterCountOfTheMlperfLayout) {
  // resnet34 through layer3 = resnet34 (21,797,672) - layer4 (13,114,368) - fc (513,000).
  const std::int64_t backbone = 21797672 - 13114368 - 513000;
  // Extras: 1x1 conv + BN, 3x3 conv + BN (no biases); channels 256->256->512, 512->256->512,
  // 512->128->256, 256->128->256, 256->128->256.
  auto extra = [](std::int64_t in, std::int64_t mid, std::int64_t out) { return in * mid + 2 * mid + mid * out * 9 + 2 * out; };
  const std::int64_t extras = extra(256, 256, 512) + extra(512, 256, 512) + extra(512, 128, 256) +
                              extra(256, 128, 256) + extra(256, 128, 256);
  // Heads: 3x3 conv with bias, defaults x (4 + 81) outputs per feature map.
  auto head = [](std::int64_t in, std::int64_t nd) { return (in * 9 + 1) * nd * (4 + 81); };
  const std::int64_t heads = head(256, 4) + head(512, 6) + head(512, 6) + head(256, 6) + head(256, 4) + head(256, 4);
  EXPECT_EQ(backbone, 8170304);
  EXPECT_EQ(parameter_count(*v::Ssd300(81)), backbone + extras + heads);
}

TEST(Ssd, FeatureMapsAndOutputs) {
  torch::NoGradGuard g;
  v::Ssd300 m(81);
  m->eval();
  auto [loc, conf] = m->forward(torch::randn({1, 3, 300, 300}));
  EXPECT_EQ(loc.sizes(), (std::vector<std::int64_t>{1, 4, 8732}));
  EXPECT_EQ(conf.sizes(), (std::vector<std::int64_t>{1, 81, 8732}));
  // The backbone's output is 38x38x256 (layer3 with stride 1).
  EXPECT_EQ(m->backbone->forward(torch::randn({1, 3, 300, 300})).sizes(),
            (std::vector<std::int64_t>{1, 256, 38, 38}));
}

TEST(SsdBoxes, DefaultBoxes) {
  auto d = v::ssd300_default_boxes();
  EXPECT_EQ(d.sizes(), (std::vector<std::int64_t>{8732, 4}));
  int total = 0;
  for (int k = 0; k < 6; ++k) total += v::kSsdFeatureSizes[k] * v::kSsdFeatureSizes[k] * v::kSsdDefaultsPerCell[k];
  EXPECT_EQ(total, 8732);
  // The first box: centre of cell (0,0) of the 38x38 map (step 8 px), size 21/300.
  EXPECT_NEAR(d[0][0].item<float>(), 0.5f / 37.5f, 1e-6);
  EXPECT_NEAR(d[0][2].item<float>(), 21.0f / 300.0f, 1e-6);
  // The last box: the 1x1 map centred, clamped to 1.
  EXPECT_NEAR(d[8731][0].item<float>(), 0.5f, 1e-6);
  EXPECT_LE(d.max().item<float>(), 1.0f);
  EXPECT_GE(d.min().item<float>(), 0.0f);
}

TEST(SsdBoxes, Iou) {
  auto a = torch::tensor({0.0f, 0.0f, 2.0f, 2.0f}).view({1, 4});
  auto b = torch::tensor({1.0f, 1.0f, 3.0f, 3.0f, 0.0f, 0.0f, 2.0f, 2.0f, 5.0f, 5.0f, 6.0f, 6.0f}).view({3, 4});
  auto iou = v::box_iou(a, b);
  EXPECT_NEAR(iou[0][0].item<float>(), 1.0f / 7.0f, 1e-6);
  EXPECT_NEAR(iou[0][1].item<float>(), 1.0f, 1e-6);
  EXPECT_NEAR(iou[0][2].item<float>(), 0.0f, 1e-6);
}

TEST(SsdBoxes, EncodeDecodeRoundTrip) {
  v::BoxEncoder enc(v::ssd300_default_boxes());
  auto gt = torch::tensor({0.1f, 0.2f, 0.4f, 0.6f, 0.5f, 0.5f, 0.9f, 0.8f}).view({2, 4});
  auto labels = torch::tensor({3, 7}, torch::kInt64);
  auto t = enc.encode(gt, labels);
  ASSERT_EQ(t.offsets.sizes(), (std::vector<std::int64_t>{8732, 4}));
  auto pos = t.labels > 0;
  ASSERT_GT(pos.sum().item<long>(), 2);
  // Decoding the targets of matched boxes gives back their ground truth.
  auto decoded = v::xywh_to_ltrb(enc.decode(t.offsets));
  for (long i : {3L, 7L}) {
    auto rows = decoded.index({t.labels == i});
    auto expect = gt[i == 3 ? 0 : 1].expand_as(rows);
    EXPECT_TRUE(torch::allclose(rows, expect, 1e-4, 1e-5)) << "label " << i;
  }
  // Unmatched boxes decode to themselves (zero offsets).
  EXPECT_TRUE(torch::allclose(t.offsets.index({~pos}), torch::zeros({(~pos).sum().item<long>(), 4}), 0, 1e-5));
}

TEST(SsdBoxes, MatchingRules) {
  auto defaults = torch::tensor({0.25f, 0.25f, 0.5f, 0.5f,   // [0,0.5]^2
                                 0.75f, 0.75f, 0.5f, 0.5f,   // [0.5,1]^2
                                 0.30f, 0.30f, 0.5f, 0.5f})  // overlaps box 0 strongly
                      .view({3, 4});
  v::BoxEncoder enc(defaults, 0.5);
  // A tiny ground truth in the bottom-right corner: IoU < 0.5 with every default
  // box, yet it keeps its best default box (index 1).
  auto gt = torch::tensor({0.0f, 0.0f, 0.5f, 0.5f, 0.9f, 0.9f, 1.0f, 1.0f}).view({2, 4});
  auto t = enc.encode(gt, torch::tensor({1, 2}, torch::kInt64));
  EXPECT_EQ(t.labels[0].item<long>(), 1);
  EXPECT_EQ(t.labels[1].item<long>(), 2);  // forced match
  EXPECT_EQ(t.labels[2].item<long>(), 1);  // IoU(0.05..0.55 vs 0..0.5) = 0.2025/0.2975 > 0.5
  // No ground truth: all background.
  auto none = enc.encode(torch::zeros({0, 4}), torch::zeros({0}, torch::kInt64));
  EXPECT_EQ(none.labels.sum().item<long>(), 0);
}

TEST(SsdBoxes, MultiboxLossIsLowForAPerfectPrediction) {
  v::BoxEncoder enc(v::ssd300_default_boxes());
  auto t = enc.encode(torch::tensor({0.1f, 0.1f, 0.5f, 0.5f}).view({1, 4}), torch::tensor({5}, torch::kInt64));
  auto offsets = t.offsets.unsqueeze(0), labels = t.labels.unsqueeze(0);
  auto perfect_conf = torch::one_hot(labels, 81).to(torch::kFloat32).permute({0, 2, 1}) * 50;
  auto perfect = v::multibox_loss(offsets.transpose(1, 2), perfect_conf, offsets, labels).item<float>();
  auto random = v::multibox_loss(torch::randn({1, 4, 8732}), torch::randn({1, 81, 8732}), offsets, labels).item<float>();
  EXPECT_LT(perfect, 1e-3);
  EXPECT_GT(random, 1.0f);
}

}  // namespace
