// The precompiled header shared by every LibTorch translation unit.
#pragma once
#include <torch/torch.h>
