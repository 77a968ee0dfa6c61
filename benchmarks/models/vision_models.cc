#include "benchmarks/models/vision_models.h"

#include <cmath>
#include <map>
#include <stdexcept>

namespace mlbench::bench::vision {

namespace nn = torch::nn;

namespace {

nn::Conv2d conv(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride = 1, std::int64_t pad = 0,
                bool bias = false) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(pad).bias(bias));
}

// torchvision BasicBlock (resnet18/34) and Bottleneck (resnet50+).
struct ResBlockImpl : nn::Module {
  ResBlockImpl(bool bottleneck, std::int64_t inplanes, std::int64_t planes, std::int64_t stride) {
    const std::int64_t expansion = bottleneck ? 4 : 1;
    if (bottleneck) {
      c1 = register_module("conv1", conv(inplanes, planes, 1));
      b1 = register_module("bn1", nn::BatchNorm2d(planes));
      c2 = register_module("conv2", conv(planes, planes, 3, stride, 1));
      b2 = register_module("bn2", nn::BatchNorm2d(planes));
      c3 = register_module("conv3", conv(planes, planes * expansion, 1));
      b3 = register_module("bn3", nn::BatchNorm2d(planes * expansion));
    } else {
      c1 = register_module("conv1", conv(inplanes, planes, 3, stride, 1));
      b1 = register_module("bn1", nn::BatchNorm2d(planes));
      c2 = register_module("conv2", conv(planes, planes, 3, 1, 1));
      b2 = register_module("bn2", nn::BatchNorm2d(planes));
    }
    if (stride != 1 || inplanes != planes * expansion) {
      downsample = register_module(
          "downsample", nn::Sequential(conv(inplanes, planes * expansion, 1, stride), nn::BatchNorm2d(planes * expansion)));
    }
  }
  // In place like torchvision's blocks (ReLU(inplace=True), out += identity): the same
  // values, without a fresh activation tensor per ReLU and per residual add.
  torch::Tensor forward(torch::Tensor x) {
    auto out = b1(c1(x)).relu_();
    out = b2(c2(out));
    if (c3) out = b3(c3(out.relu_()));
    out += downsample ? downsample->forward(x) : x;
    return out.relu_();
  }
  nn::Conv2d c1{nullptr}, c2{nullptr}, c3{nullptr};
  nn::BatchNorm2d b1{nullptr}, b2{nullptr}, b3{nullptr};
  nn::Sequential downsample{nullptr};
};
TORCH_MODULE(ResBlock);

// One ResNet stage; `inplanes` is updated to the stage's output channels.
nn::Sequential make_stage(bool bottleneck, std::int64_t& inplanes, std::int64_t planes, int blocks,
                          std::int64_t stride) {
  nn::Sequential s;
  s->push_back(ResBlock(bottleneck, inplanes, planes, stride));
  inplanes = planes * (bottleneck ? 4 : 1);
  for (int i = 1; i < blocks; ++i) s->push_back(ResBlock(bottleneck, inplanes, planes, 1));
  return s;
}

// torchvision's ResNet init: Kaiming normal (fan_out, relu) for convolutions, BN weight 1, bias 0.
void init_resnet(nn::Module& m) {
  for (auto& mod : m.modules(/*include_self=*/false)) {
    if (auto* c = mod->as<nn::Conv2d>()) {
      nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
    } else if (auto* b = mod->as<nn::BatchNorm2d>()) {
      nn::init::ones_(b->weight);
      nn::init::zeros_(b->bias);
    }
  }
}

}  // namespace

const std::vector<std::string>& resnet_archs() {
  static const std::vector<std::string> kArchs{"resnet18", "resnet34", "resnet50", "resnet101", "resnet152"};
  return kArchs;
}

ResNetSpec resnet_spec(const std::string& arch) {
  static const std::map<std::string, ResNetSpec> kSpecs{
      {"resnet18", {false, {2, 2, 2, 2}}},  {"resnet34", {false, {3, 4, 6, 3}}},
      {"resnet50", {true, {3, 4, 6, 3}}},   {"resnet101", {true, {3, 4, 23, 3}}},
      {"resnet152", {true, {3, 8, 36, 3}}},
  };
  auto it = kSpecs.find(arch);
  if (it == kSpecs.end()) {
    throw std::invalid_argument("unknown --arch '" + arch + "' (choose resnet18, resnet34, resnet50, resnet101, resnet152)");
  }
  return it->second;
}

ResNetImpl::ResNetImpl(const ResNetSpec& spec, std::int64_t classes) {
  conv1 = register_module("conv1", conv(3, 64, 7, 2, 3));
  bn1 = register_module("bn1", nn::BatchNorm2d(64));
  std::int64_t inplanes = 64;
  layer1 = register_module("layer1", make_stage(spec.bottleneck, inplanes, 64, spec.blocks.at(0), 1));
  layer2 = register_module("layer2", make_stage(spec.bottleneck, inplanes, 128, spec.blocks.at(1), 2));
  layer3 = register_module("layer3", make_stage(spec.bottleneck, inplanes, 256, spec.blocks.at(2), 2));
  layer4 = register_module("layer4", make_stage(spec.bottleneck, inplanes, 512, spec.blocks.at(3), 2));
  fc = register_module("fc", nn::Linear(inplanes, classes));
  init_resnet(*this);
}

torch::Tensor ResNetImpl::forward(torch::Tensor x) {
  x = bn1(conv1(x)).relu_();
  x = torch::max_pool2d(x, 3, 2, 1);
  x = layer4->forward(layer3->forward(layer2->forward(layer1->forward(x))));
  x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
  return fc(x);
}

// --- DCGAN

namespace {
void init_dcgan(nn::Module& m) {
  torch::NoGradGuard no_grad;
  for (auto& mod : m.modules(false)) {
    if (auto* c = mod->as<nn::Conv2d>()) {
      c->weight.normal_(0.0, 0.02);
    } else if (auto* t = mod->as<nn::ConvTranspose2d>()) {
      t->weight.normal_(0.0, 0.02);
    } else if (auto* b = mod->as<nn::BatchNorm2d>()) {
      b->weight.normal_(1.0, 0.02);
      b->bias.zero_();
    }
  }
}
nn::ConvTranspose2d deconv(std::int64_t in, std::int64_t out, std::int64_t stride, std::int64_t pad) {
  return nn::ConvTranspose2d(nn::ConvTranspose2dOptions(in, out, 4).stride(stride).padding(pad).bias(false));
}
}  // namespace

DcganGeneratorImpl::DcganGeneratorImpl(std::int64_t nz, std::int64_t ngf, std::int64_t nc) {
  main = register_module(
      "main", nn::Sequential(deconv(nz, ngf * 8, 1, 0), nn::BatchNorm2d(ngf * 8), nn::ReLU(true),  // 4x4
                             deconv(ngf * 8, ngf * 4, 2, 1), nn::BatchNorm2d(ngf * 4), nn::ReLU(true),  // 8x8
                             deconv(ngf * 4, ngf * 2, 2, 1), nn::BatchNorm2d(ngf * 2), nn::ReLU(true),  // 16x16
                             deconv(ngf * 2, ngf, 2, 1), nn::BatchNorm2d(ngf), nn::ReLU(true),          // 32x32
                             deconv(ngf, nc, 2, 1), nn::Tanh()));                                       // 64x64
  init_dcgan(*this);
}

torch::Tensor DcganGeneratorImpl::forward(const torch::Tensor& z) { return main->forward(z); }

DcganDiscriminatorImpl::DcganDiscriminatorImpl(std::int64_t ndf, std::int64_t nc) {
  auto lrelu = [] { return nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2).inplace(true)); };
  main = register_module(
      "main", nn::Sequential(conv(nc, ndf, 4, 2, 1), lrelu(),                                          // 32x32
                             conv(ndf, ndf * 2, 4, 2, 1), nn::BatchNorm2d(ndf * 2), lrelu(),          // 16x16
                             conv(ndf * 2, ndf * 4, 4, 2, 1), nn::BatchNorm2d(ndf * 4), lrelu(),      // 8x8
                             conv(ndf * 4, ndf * 8, 4, 2, 1), nn::BatchNorm2d(ndf * 8), lrelu(),      // 4x4
                             conv(ndf * 8, 1, 4, 1, 0), nn::Sigmoid()));
  init_dcgan(*this);
}

torch::Tensor DcganDiscriminatorImpl::forward(const torch::Tensor& image) {
  return main->forward(image).view({-1});
}

// --- ESPCN

EspcnImpl::EspcnImpl(std::int64_t r) : upscale(r) {
  conv1 = register_module("conv1", conv(1, 64, 5, 1, 2, true));
  conv2 = register_module("conv2", conv(64, 64, 3, 1, 1, true));
  conv3 = register_module("conv3", conv(64, 32, 3, 1, 1, true));
  conv4 = register_module("conv4", conv(32, r * r, 3, 1, 1, true));
  // The example's init: orthogonal, gain calculate_gain('relu') except the last layer.
  torch::NoGradGuard no_grad;
  const double relu_gain = std::sqrt(2.0);
  nn::init::orthogonal_(conv1->weight, relu_gain);
  nn::init::orthogonal_(conv2->weight, relu_gain);
  nn::init::orthogonal_(conv3->weight, relu_gain);
  nn::init::orthogonal_(conv4->weight);
}

torch::Tensor EspcnImpl::forward(const torch::Tensor& y) {
  auto x = torch::relu(conv1(y));
  x = torch::relu(conv2(x));
  x = torch::relu(conv3(x));
  return torch::pixel_shuffle(conv4(x), upscale);
}

torch::Tensor rgb_to_y(const torch::Tensor& rgb) {
  auto w = torch::tensor({0.299f, 0.587f, 0.114f}, rgb.options()).view({1, 3, 1, 1});
  return (rgb * w).sum(1, /*keepdim=*/true);
}

// --- fast neural style

namespace {

// ReflectionPad2d(k/2) + Conv2d, with an optional nearest 2x upsample first (UpsampleConvLayer).
struct StyleConvImpl : nn::Module {
  StyleConvImpl(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride, std::int64_t upsample = 0)
      : upsample(upsample) {
    pad = register_module("pad", nn::ReflectionPad2d(k / 2));
    c = register_module("conv2d", nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride)));
  }
  torch::Tensor forward(torch::Tensor x) {
    if (upsample > 0) {
      x = torch::upsample_nearest2d(x, {x.size(2) * upsample, x.size(3) * upsample});
    }
    return c(pad(x));
  }
  std::int64_t upsample;
  nn::ReflectionPad2d pad{nullptr};
  nn::Conv2d c{nullptr};
};
TORCH_MODULE(StyleConv);

nn::InstanceNorm2d inorm(std::int64_t c) { return nn::InstanceNorm2d(nn::InstanceNorm2dOptions(c).affine(true)); }

struct StyleResidualImpl : nn::Module {
  explicit StyleResidualImpl(std::int64_t c) {
    c1 = register_module("conv1", StyleConv(c, c, 3, 1));
    in1 = register_module("in1", inorm(c));
    c2 = register_module("conv2", StyleConv(c, c, 3, 1));
    in2 = register_module("in2", inorm(c));
  }
  torch::Tensor forward(const torch::Tensor& x) { return in2(c2(torch::relu(in1(c1(x))))) + x; }
  StyleConv c1{nullptr}, c2{nullptr};
  nn::InstanceNorm2d in1{nullptr}, in2{nullptr};
};
TORCH_MODULE(StyleResidual);

}  // namespace

TransformerNetImpl::TransformerNetImpl() {
  nn::Sequential s(StyleConv(3, 32, 9, 1), inorm(32), nn::ReLU(), StyleConv(32, 64, 3, 2), inorm(64), nn::ReLU(),
                   StyleConv(64, 128, 3, 2), inorm(128), nn::ReLU());
  for (int i = 0; i < 5; ++i) s->push_back(StyleResidual(128));
  s->push_back(StyleConv(128, 64, 3, 1, 2));
  s->push_back(inorm(64));
  s->push_back(nn::ReLU());
  s->push_back(StyleConv(64, 32, 3, 1, 2));
  s->push_back(inorm(32));
  s->push_back(nn::ReLU());
  s->push_back(StyleConv(32, 3, 9, 1));
  net = register_module("net", s);
}

torch::Tensor TransformerNetImpl::forward(const torch::Tensor& x) { return net->forward(x); }

Vgg16FeaturesImpl::Vgg16FeaturesImpl() {
  auto block = [](std::initializer_list<std::int64_t> channels, std::int64_t in, bool pool_first) {
    nn::Sequential s;
    if (pool_first) s->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2)));
    for (auto c : channels) {
      s->push_back(nn::Conv2d(nn::Conv2dOptions(in, c, 3).padding(1)));
      s->push_back(nn::ReLU(true));
      in = c;
    }
    return s;
  };
  slice1 = register_module("slice1", block({64, 64}, 3, false));
  slice2 = register_module("slice2", block({128, 128}, 64, true));
  slice3 = register_module("slice3", block({256, 256, 256}, 128, true));
  slice4 = register_module("slice4", block({512, 512, 512}, 256, true));
  for (auto& p : parameters()) p.set_requires_grad(false);  // frozen: the loss network
}

std::vector<torch::Tensor> Vgg16FeaturesImpl::forward(const torch::Tensor& x) {
  auto h1 = slice1->forward(x);
  auto h2 = slice2->forward(h1);
  auto h3 = slice3->forward(h2);
  auto h4 = slice4->forward(h3);
  return {h1, h2, h3, h4};
}

torch::Tensor gram_matrix(const torch::Tensor& y) {
  const auto b = y.size(0), ch = y.size(1), h = y.size(2), w = y.size(3);
  auto f = y.view({b, ch, w * h});
  return f.bmm(f.transpose(1, 2)) / static_cast<double>(ch * h * w);
}

// --- SSD300 / ResNet-34

Ssd300Impl::Ssd300Impl(std::int64_t classes_) : classes(classes_) {
  const ResNetSpec r34 = resnet_spec("resnet34");
  std::int64_t inplanes = 64;
  nn::Sequential b(conv(3, 64, 7, 2, 3), nn::BatchNorm2d(64), nn::ReLU(true),
                   nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
  // Stages' blocks appended one by one (a Sequential cannot hold a Sequential).
  // MLPerf: conv4_x (layer3) gets stride 1, so its output is 38x38 at 300 px.
  for (auto& stage : {make_stage(false, inplanes, 64, r34.blocks[0], 1), make_stage(false, inplanes, 128, r34.blocks[1], 2),
                      make_stage(false, inplanes, 256, r34.blocks[2], 1)}) {
    for (const auto& block : *stage) b->push_back(block);
  }
  backbone = register_module("backbone", b);
  init_resnet(*backbone);

  const std::int64_t out_channels[6] = {256, 512, 512, 256, 256, 256};
  const std::int64_t mid_channels[5] = {256, 256, 128, 128, 128};
  for (int i = 0; i < 5; ++i) {
    const bool strided = i < 3;  // 38->19->10->5 with stride 2; 5->3->1 with unpadded 3x3
    nn::Sequential e(conv(out_channels[i], mid_channels[i], 1), nn::BatchNorm2d(mid_channels[i]), nn::ReLU(true),
                     conv(mid_channels[i], out_channels[i + 1], 3, strided ? 2 : 1, strided ? 1 : 0),
                     nn::BatchNorm2d(out_channels[i + 1]), nn::ReLU(true));
    extras.push_back(register_module("extra" + std::to_string(i), e));
  }
  for (int i = 0; i < 6; ++i) {
    const std::int64_t nd = kSsdDefaultsPerCell[i];
    loc.push_back(register_module("loc" + std::to_string(i), conv(out_channels[i], nd * 4, 3, 1, 1, true)));
    conf.push_back(register_module("conf" + std::to_string(i), conv(out_channels[i], nd * classes, 3, 1, 1, true)));
  }
  // The reference's init: Xavier uniform for the extra layers and heads.
  for (auto& e : extras) {
    for (auto& m : e->modules(false)) {
      if (auto* c = m->as<nn::Conv2d>()) nn::init::xavier_uniform_(c->weight);
    }
  }
  for (auto& c : loc) nn::init::xavier_uniform_(c->weight);
  for (auto& c : conf) nn::init::xavier_uniform_(c->weight);
}

std::pair<torch::Tensor, torch::Tensor> Ssd300Impl::forward(const torch::Tensor& x) {
  auto f = backbone->forward(x);
  std::vector<torch::Tensor> locs, confs;
  const auto n = x.size(0);
  for (int i = 0; i < 6; ++i) {
    if (i > 0) f = extras[i - 1]->forward(f);
    locs.push_back(loc[i](f).view({n, 4, -1}));
    confs.push_back(conf[i](f).view({n, classes, -1}));
  }
  return {torch::cat(locs, 2).contiguous(), torch::cat(confs, 2).contiguous()};
}

}  // namespace mlbench::bench::vision
