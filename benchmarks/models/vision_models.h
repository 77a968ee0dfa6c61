// The LibTorch models of the image benchmarks (convnet, convnet_fp16, dcgan,
// reso, fast_style, ssd), in one translation unit so they compile once and
// are unit-tested for output shapes and parameter counts. Each follows the
// published architecture it names; weights start random (no downloads).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "benchmarks/models/parameter_count.h"

namespace mlbench::bench::vision {

// --- ResNet (torchvision's resnet18/34/50/101/152, v1.5: the stride of a
// bottleneck sits on its 3x3 convolution). Kaiming init as torchvision.
struct ResNetSpec {
  bool bottleneck = false;
  std::vector<int> blocks;  // blocks per stage (4 stages)
};
// "resnet18" ... "resnet152"; throws std::invalid_argument naming the choices.
ResNetSpec resnet_spec(const std::string& arch);
const std::vector<std::string>& resnet_archs();

struct ResNetImpl : torch::nn::Module {
  ResNetImpl(const ResNetSpec& spec, std::int64_t classes);
  // [N, 3, H, W] -> logits [N, classes] (any H, W >= 32: adaptive pooling)
  torch::Tensor forward(torch::Tensor x);
  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  torch::nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet);

// --- DCGAN 64x64 (PyTorch examples/dcgan): generator z [N, nz, 1, 1] ->
// image [N, nc, 64, 64] in (-1, 1); discriminator image -> probability [N].
// Weights N(0, 0.02), BatchNorm weight N(1, 0.02), as the example's weights_init.
struct DcganGeneratorImpl : torch::nn::Module {
  DcganGeneratorImpl(std::int64_t nz = 100, std::int64_t ngf = 64, std::int64_t nc = 3);
  torch::Tensor forward(const torch::Tensor& z);
  torch::nn::Sequential main{nullptr};
};
TORCH_MODULE(DcganGenerator);

struct DcganDiscriminatorImpl : torch::nn::Module {
  DcganDiscriminatorImpl(std::int64_t ndf = 64, std::int64_t nc = 3);
  torch::Tensor forward(const torch::Tensor& image);
  torch::nn::Sequential main{nullptr};
};
TORCH_MODULE(DcganDiscriminator);

// --- ESPCN (PyTorch examples/super_resolution): the Y channel [N, 1, h, w]
// -> [N, 1, h*r, w*r] through conv 5x5/64, 3x3/64, 3x3/32, 3x3/r^2 and a pixel shuffle.
struct EspcnImpl : torch::nn::Module {
  explicit EspcnImpl(std::int64_t upscale = 2);
  torch::Tensor forward(const torch::Tensor& y);
  std::int64_t upscale;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr}, conv4{nullptr};
};
TORCH_MODULE(Espcn);

// RGB [N, 3, H, W] in [0, 1] -> luma Y [N, 1, H, W] (ITU-R BT.601, as PIL's YCbCr).
torch::Tensor rgb_to_y(const torch::Tensor& rgb);

// --- fast neural style (PyTorch examples/fast_neural_style): TransformerNet
// (reflection-padded convs, instance norm, 5 residual blocks, nearest
// upsampling) and the frozen VGG16 feature slices of its perceptual loss.
struct TransformerNetImpl : torch::nn::Module {
  TransformerNetImpl();
  // [N, 3, H, W] (0..255 scale) -> [N, 3, H, W]; H, W multiples of 4.
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Sequential net{nullptr};
};
TORCH_MODULE(TransformerNet);

// torchvision's vgg16().features up to relu4_3 (the 23 layers the example
// uses); forward returns relu1_2, relu2_2, relu3_3, relu4_3.
struct Vgg16FeaturesImpl : torch::nn::Module {
  Vgg16FeaturesImpl();
  std::vector<torch::Tensor> forward(const torch::Tensor& x);
  torch::nn::Sequential slice1{nullptr}, slice2{nullptr}, slice3{nullptr}, slice4{nullptr};
};
TORCH_MODULE(Vgg16Features);

// Gram matrix of features [N, C, H, W] -> [N, C, C] / (C*H*W), as the example.
torch::Tensor gram_matrix(const torch::Tensor& features);

// --- SSD300 with a ResNet-34 backbone (the MLPerf training / NVIDIA
// DeepLearningExamples layout): resnet34 through layer3 with layer3's stride
// set to 1 (38x38x256 at 300 px), five extra blocks (19, 10, 5, 3, 1), and a
// 3x3 location and confidence head per feature map with 4/6/6/6/4/4 default
// boxes per cell (8732 in all at 300 px).
struct Ssd300Impl : torch::nn::Module {
  explicit Ssd300Impl(std::int64_t classes = 81);
  // [N, 3, 300, 300] -> (locations [N, 4, boxes], scores [N, classes, boxes])
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x);
  std::int64_t classes;
  torch::nn::Sequential backbone{nullptr};
  std::vector<torch::nn::Sequential> extras;
  std::vector<torch::nn::Conv2d> loc, conf;
};
TORCH_MODULE(Ssd300);

inline constexpr int kSsdDefaultsPerCell[6] = {4, 6, 6, 6, 4, 4};
inline constexpr int kSsdFeatureSizes[6] = {38, 19, 10, 5, 3, 1};

}  // namespace mlbench::bench::vision
