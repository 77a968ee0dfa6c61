// The list of dataset recipes mlbench-datagen knows. One line per recipe.
#include "datasets/recipe.h"

namespace mlbench::datasets {

const std::vector<Recipe>& all_recipes() {
  static const std::vector<Recipe> kRecipes{
      fake_imagenet_recipe(),
      mnist_recipe(),
      wikitext2_recipe(),
      ml20m_recipe(),
      wmt16_recipe(),
      bsds500_recipe(),
      coco_shapes_recipe(),
      real_photos_recipe(),
  };
  return kRecipes;
}

}  // namespace mlbench::datasets
