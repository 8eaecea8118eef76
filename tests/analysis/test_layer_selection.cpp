// analysis::resolve_layers: the one layer-selection rule of analysis, calibration and the
// demo (they had two, one of which accepted a layer twice).
#include <gtest/gtest.h>

#include "oal/analysis/layer_selection.h"
#include "oal/core/error.h"

using oal::analysis::resolve_layers;

TEST(LayerSelection, EmptyMeansEveryLayerAndAListKeepsItsOrder) {
  EXPECT_EQ(resolve_layers({}, 4), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(resolve_layers({3, 0, 2}, 4), (std::vector<int64_t>{3, 0, 2}));
}

TEST(LayerSelection, OutOfRangeAndRepeatedLayersAreNamed) {
  auto message = [](const std::vector<int64_t>& layers) {
    try {
      resolve_layers(layers, 6);
    } catch (const oal::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({1, 6}), "[layers] layer 6 does not exist; the model has layers 0..5");
  EXPECT_EQ(message({-1}), "[layers] layer -1 does not exist; the model has layers 0..5");
  EXPECT_EQ(message({2, 4, 2}), "[layers] layer 2 is listed twice");
}
