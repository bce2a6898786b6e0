//===- Plot.cpp - training curves from a metrics file ---------------------===//

#include "tools/ztc/Plot.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

using namespace mlir::ztc;

namespace {

/// One curve: (step, value) for the lines that have the field. An
/// optional one (the held-out evaluation's) gets a panel only when the
/// file has values for it.
struct Curve {
  const char *field, *title, *color;
  std::vector<std::pair<double, double>> points;
  bool optional = false;
};

/// A number for the axis labels: 3 significant digits.
std::string label(double value) {
  return llvm::formatv("{0}", llvm::format("%.3g", value)).str();
}

} // namespace

std::string mlir::ztc::plotMetrics(llvm::StringRef path, llvm::StringRef text,
                                   llvm::raw_ostream &os) {
  Curve curves[] = {
      {"loss", "loss", "#4e79a7", {}},
      {"learning_rate", "learning rate", "#f28e2b", {}},
      {"grad_norm", "gradient norm (before clipping)", "#e15759", {}},
      {"loss_scale", "loss scale", "#59a14f", {}},
      {"eval_loss", "held-out loss (--eval-data)", "#76b7b2", {}, true},
      {"eval_accuracy", "held-out accuracy (--eval-data)", "#b07aa1", {},
       true}};
  size_t number = 0, lines = 0;
  llvm::SmallVector<llvm::StringRef> rows;
  text.split(rows, '\n');
  for (llvm::StringRef row : rows) {
    ++number;
    if (row.trim().empty())
      continue;
    llvm::Expected<llvm::json::Value> value = llvm::json::parse(row);
    if (!value)
      return llvm::formatv("{0}:{1}: not JSON: {2}", path, number,
                           llvm::toString(value.takeError()))
          .str();
    const llvm::json::Object *object = value->getAsObject();
    std::optional<double> step =
        object ? object->getNumber("step") : std::nullopt;
    if (!step)
      return llvm::formatv("{0}:{1}: not a metrics line (no numeric \"step\"; "
                           "write one with ztc-train --metrics)",
                           path, number)
          .str();
    ++lines;
    for (Curve &curve : curves)
      if (std::optional<double> y = object->getNumber(curve.field);
          y && std::isfinite(*y))
        curve.points.push_back({*step, *y});
  }
  if (lines == 0)
    return (path + ": no metrics lines").str();
  std::vector<const Curve *> shown;
  for (const Curve &curve : curves)
    if (!curve.optional || !curve.points.empty())
      shown.push_back(&curve);

  constexpr double kWidth = 720, kPanel = 200, kLeft = 80, kRight = 30,
                   kTop = 40, kGap = 50;
  double minStep = 1e300, maxStep = -1e300;
  for (const Curve *curve : shown)
    for (auto [x, y] : curve->points) {
      minStep = std::min(minStep, x);
      maxStep = std::max(maxStep, x);
    }
  if (minStep > maxStep)
    minStep = maxStep = 0;
  double height = kTop + double(shown.size()) * (kPanel + kGap);
  double plotW = kWidth - kLeft - kRight;
  os << llvm::formatv("<svg xmlns=\"http://www.w3.org/2000/svg\" "
                      "width=\"{0}\" height=\"{1}\" font-family=\"sans-serif\" "
                      "font-size=\"12\">\n",
                      int(kWidth), int(height));
  std::string title;
  for (char c : path) {
    if (c == '&')
      title += "&amp;";
    else if (c == '<')
      title += "&lt;";
    else if (c == '>')
      title += "&gt;";
    else
      title += c;
  }
  os << "<title>ztc training curves: " << title << "</title>\n";
  for (auto [index, shownCurve] : llvm::enumerate(shown)) {
    const Curve &curve = *shownCurve;
    double top = kTop + double(index) * (kPanel + kGap);
    os << llvm::formatv(
        "<text x=\"{0}\" y=\"{1}\" font-size=\"14\">{2}</text>\n", int(kLeft),
        int(top - 10), curve.title);
    os << llvm::formatv(
        "<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" "
        "fill=\"none\" stroke=\"#999\"/>\n",
        int(kLeft), int(top), int(plotW), int(kPanel));
    if (curve.points.empty()) {
      os << llvm::formatv("<text class=\"{0}\" x=\"{1}\" y=\"{2}\" "
                          "fill=\"#666\">no values (the run did not compute "
                          "it)</text>\n",
                          curve.field, int(kLeft + 10), int(top + kPanel / 2));
      continue;
    }
    double low = 1e300, high = -1e300;
    for (auto [x, y] : curve.points) {
      low = std::min(low, y);
      high = std::max(high, y);
    }
    if (high - low < 1e-12 * std::max(1.0, std::fabs(high))) {
      low -= 0.5 * std::max(1e-12, std::fabs(low));
      high += 0.5 * std::max(1e-12, std::fabs(high));
    }
    auto px = [&](double x) {
      return kLeft +
             (maxStep > minStep ? (x - minStep) / (maxStep - minStep) : 0.5) *
                 plotW;
    };
    auto py = [&](double y) {
      return top + kPanel - (y - low) / (high - low) * kPanel;
    };
    os << llvm::formatv("<polyline class=\"{0}\" fill=\"none\" stroke=\"{1}\" "
                        "stroke-width=\"1.5\" points=\"",
                        curve.field, curve.color);
    for (auto [x, y] : curve.points)
      os << llvm::formatv("{0:F1},{1:F1} ", px(x), py(y));
    os << "\"/>\n";
    // The value axis (its ends) and the step axis.
    os << llvm::formatv(
        "<text x=\"{0}\" y=\"{1}\" text-anchor=\"end\">{2}</text>\n",
        int(kLeft - 6), int(top + 12), label(high));
    os << llvm::formatv(
        "<text x=\"{0}\" y=\"{1}\" text-anchor=\"end\">{2}</text>\n",
        int(kLeft - 6), int(top + kPanel), label(low));
    os << llvm::formatv("<text x=\"{0}\" y=\"{1}\">step {2}</text>\n",
                        int(kLeft), int(top + kPanel + 16), label(minStep));
    os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"end\">step "
                        "{2}</text>\n",
                        int(kLeft + plotW), int(top + kPanel + 16),
                        label(maxStep));
  }
  os << "</svg>\n";
  return "";
}
