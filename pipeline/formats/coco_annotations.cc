#include "pipeline/formats/coco_annotations.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace mlbench::pipeline {

namespace fs = std::filesystem;

namespace {

const nlohmann::json& field(const nlohmann::json& obj, const char* name, const std::string& where,
                            const char* what) {
  if (!obj.is_object() || !obj.contains(name)) {
    throw DataError(where + ": " + what + " has no \"" + name + "\" field");
  }
  return obj.at(name);
}

}  // namespace

CocoAnnotations parse_coco_annotations(const nlohmann::json& doc, const std::string& where) {
  CocoAnnotations out;
  try {
    const auto& cats = field(doc, "categories", where, "the document");
    std::vector<std::pair<int, std::string>> sorted;
    for (const auto& c : cats) {
      sorted.emplace_back(field(c, "id", where, "a category").get<int>(),
                          c.value("name", std::string()));
    }
    std::sort(sorted.begin(), sorted.end());
    std::unordered_map<int, int> label_of;
    for (std::size_t i = 0; i < sorted.size(); ++i) {
      out.category_ids.push_back(sorted[i].first);
      out.category_names.push_back(sorted[i].second);
      label_of[sorted[i].first] = static_cast<int>(i) + 1;
    }
    std::unordered_map<long, std::size_t> image_of;
    for (const auto& im : field(doc, "images", where, "the document")) {
      CocoImage ci;
      ci.file_name = field(im, "file_name", where, "an image").get<std::string>();
      ci.width = field(im, "width", where, "an image").get<int>();
      ci.height = field(im, "height", where, "an image").get<int>();
      const long id = field(im, "id", where, "an image").get<long>();
      if (ci.width <= 0 || ci.height <= 0) throw DataError(where + ": image " + ci.file_name + " has no size");
      image_of[id] = out.images.size();
      out.images.push_back(std::move(ci));
    }
    for (const auto& a : field(doc, "annotations", where, "the document")) {
      if (a.value("iscrowd", 0) != 0) continue;
      const long image_id = field(a, "image_id", where, "an annotation").get<long>();
      const int cat = field(a, "category_id", where, "an annotation").get<int>();
      const auto& bbox = field(a, "bbox", where, "an annotation");
      auto im = image_of.find(image_id);
      if (im == image_of.end()) throw DataError(where + ": an annotation names unknown image id " + std::to_string(image_id));
      auto lab = label_of.find(cat);
      if (lab == label_of.end()) throw DataError(where + ": an annotation names unknown category id " + std::to_string(cat));
      if (!bbox.is_array() || bbox.size() != 4) throw DataError(where + ": a bbox is not [x, y, width, height]");
      CocoBox b{bbox[0].get<double>(), bbox[1].get<double>(), bbox[2].get<double>(), bbox[3].get<double>(), lab->second};
      if (b.w <= 0 || b.h <= 0) continue;  // degenerate boxes exist in COCO; the reference skips them too
      out.images[im->second].boxes.push_back(b);
      ++out.annotations;
    }
  } catch (const nlohmann::json::exception& e) {
    throw DataError(where + ": malformed COCO annotations (" + e.what() + ")");
  }
  return out;
}

CocoAnnotations read_coco_annotations(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw DataError("cannot open annotations " + file.string());
  nlohmann::json doc;
  try {
    in >> doc;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(file.string() + ": not valid JSON (" + e.what() + ")");
  }
  return parse_coco_annotations(doc, file.string());
}

std::vector<RelBox> boxes_in_crop(const CocoImage& image, int cx, int cy, int cw, int ch, double min_keep) {
  std::vector<RelBox> out;
  for (const auto& b : image.boxes) {
    const double l = std::max(b.x, static_cast<double>(cx));
    const double t = std::max(b.y, static_cast<double>(cy));
    const double r = std::min(b.x + b.w, static_cast<double>(cx + cw));
    const double bt = std::min(b.y + b.h, static_cast<double>(cy + ch));
    if (r <= l || bt <= t) continue;
    if ((r - l) * (bt - t) < min_keep * b.w * b.h) continue;
    out.push_back({static_cast<float>((l - cx) / cw), static_cast<float>((t - cy) / ch),
                   static_cast<float>((r - cx) / cw), static_cast<float>((bt - cy) / ch), b.label});
  }
  return out;
}

CocoImageSource::CocoImageSource(fs::path image_dir, CocoAnnotations annotations)
    : dir_(std::move(image_dir)), annotations_(std::move(annotations)) {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) throw DataError("image folder " + dir_.string() + " does not exist");
  if (annotations_.images.empty()) throw DataError("the annotations of " + dir_.string() + " list no images");
  for (const auto& im : annotations_.images) {
    if (!fs::is_regular_file(dir_ / im.file_name, ec)) {
      throw DataError("image " + (dir_ / im.file_name).string() + " listed in the annotations is missing");
    }
  }
}

std::string CocoImageSource::describe(std::size_t index) const {
  return (dir_ / annotations_.images[index].file_name).string();
}

void CocoImageSource::fetch(std::size_t index, Bytes& out) const {
  read_file(dir_ / annotations_.images[index].file_name, out);
}

}  // namespace mlbench::pipeline
