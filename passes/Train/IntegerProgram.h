//===- IntegerProgram.h - a 0-1 integer program, solved by CBC --*- C++ -*-===//
//
// The small integer-programming interface ztc-recompute's budget mode
// builds its problem with: binary (and continuous) columns, linear rows,
// a minimized objective. COIN-OR CBC (Debian's coinor-libcbc-dev) solves
// it; nothing else in ztc sees the solver.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_TRAIN_INTEGERPROGRAM_H
#define ZTC_PASSES_TRAIN_INTEGERPROGRAM_H

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace mlir::ztc {

/// minimize Σ cost·x subject to lower ≤ Σ coefficient·x ≤ upper per row.
class IntegerProgram {
public:
  /// A column in [lower, upper], integral unless `continuous`; returns its
  /// index.
  int addColumn(double cost, double lower = 0, double upper = 1,
                bool continuous = false);
  /// A row: Σ terms ≤ upper (use `atLeast` for ≥).
  void addRowAtMost(std::vector<std::pair<int, double>> terms, double upper);
  void addRowAtLeast(std::vector<std::pair<int, double>> terms, double lower);

  size_t columns() const { return costs.size(); }
  size_t rows() const { return rowTerms.size(); }

  struct Solution {
    std::vector<double> values;
    /// The objective of `values`, and the best bound the search proved.
    double objective = 0, bound = 0;
    /// Whether the search finished (`objective` is optimal); false when it
    /// stopped at the node limit with a feasible solution.
    bool optimal = false;
    /// Branch-and-bound nodes explored.
    int64_t nodes = 0;
    /// (objective - bound) / |objective|, 0 when optimal.
    double gap() const;
    bool isSet(int column) const { return values[column] > 0.5; }
  };

  /// Solves exploring at most `maxNodes` branch-and-bound nodes on one
  /// thread, with no clock involved: the same program gives the same
  /// solution on any machine at any load. nullopt: infeasible, or no
  /// feasible solution found within the nodes (`stopped` says which).
  /// `start`, when given, is a feasible solution (the values of another
  /// solve of a program with the same columns), which the search begins
  /// from: an incumbent that prunes every branch costing more.
  std::optional<Solution>
  solve(int64_t maxNodes, bool *stopped = nullptr,
        const std::vector<double> *start = nullptr) const;

private:
  struct Row {
    std::vector<std::pair<int, double>> terms;
    char sense;
    double rhs;
  };
  std::vector<double> costs, lowers, uppers;
  std::vector<bool> integral;
  std::vector<Row> rowTerms;
};

} // namespace mlir::ztc

#endif // ZTC_PASSES_TRAIN_INTEGERPROGRAM_H
