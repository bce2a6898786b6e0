//===- IntegerProgram.cpp - a 0-1 integer program, solved by CBC ----------===//

#include "passes/Train/IntegerProgram.h"

#include <coin/Cbc_C_Interface.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <memory>
#include <string>

using namespace mlir::ztc;

int IntegerProgram::addColumn(double cost, double lower, double upper,
                              bool continuous) {
  costs.push_back(cost);
  lowers.push_back(lower);
  uppers.push_back(upper);
  integral.push_back(!continuous);
  return int(costs.size() - 1);
}

void IntegerProgram::addRowAtMost(std::vector<std::pair<int, double>> terms,
                                  double upper) {
  rowTerms.push_back({std::move(terms), 'L', upper});
}

void IntegerProgram::addRowAtLeast(std::vector<std::pair<int, double>> terms,
                                   double lower) {
  rowTerms.push_back({std::move(terms), 'G', lower});
}

double IntegerProgram::Solution::gap() const {
  if (optimal || objective == 0)
    return 0;
  return std::max(0.0, (objective - bound) / std::fabs(objective));
}

std::optional<IntegerProgram::Solution>
IntegerProgram::solve(int64_t maxNodes, bool *stopped,
                      const std::vector<double> *start) const {
  std::unique_ptr<Cbc_Model, void (*)(Cbc_Model *)> model(Cbc_newModel(),
                                                          Cbc_deleteModel);
  // Columns first, without coefficients; then rows.
  for (size_t i = 0; i < costs.size(); ++i)
    Cbc_addCol(model.get(), ("x" + std::to_string(i)).c_str(), lowers[i],
               uppers[i], costs[i], integral[i] ? 1 : 0, 0, nullptr, nullptr);
  std::vector<int> columns;
  std::vector<double> coefficients;
  for (size_t r = 0; r < rowTerms.size(); ++r) {
    const Row &row = rowTerms[r];
    columns.clear();
    coefficients.clear();
    for (auto [column, coefficient] : row.terms) {
      columns.push_back(column);
      coefficients.push_back(coefficient);
    }
    Cbc_addRow(model.get(), ("r" + std::to_string(r)).c_str(),
               int(columns.size()), columns.data(), coefficients.data(),
               row.sense, row.rhs);
  }
  // A known feasible solution: its binary columns set to one (CBC
  // computes the continuous ones).
  if (start) {
    std::vector<int> set;
    std::vector<double> ones;
    for (size_t i = 0; i < costs.size() && i < start->size(); ++i)
      if (integral[i] && (*start)[i] > 0.5) {
        set.push_back(int(i));
        ones.push_back(1.0);
      }
    Cbc_setMIPStartI(model.get(), int(set.size()), set.data(), ones.data());
  }
  Cbc_setLogLevel(model.get(), 0);
  // One thread and a node limit, no time limit: no clock decides where
  // the search stops, so a compile gives the same plan under any load.
  Cbc_setParameter(model.get(), "threads", "1");
  Cbc_setMaximumNodes(model.get(),
                      int(std::clamp<int64_t>(maxNodes, 0, INT32_MAX)));
  Cbc_solve(model.get());

  Solution solution;
  solution.nodes = Cbc_getNodeCount(model.get());
  bool limited = Cbc_isNodeLimitReached(model.get());
  if (stopped)
    *stopped = limited;
  if (Cbc_isProvenInfeasible(model.get()) || Cbc_isAbandoned(model.get()))
    return std::nullopt;
  const double *values = Cbc_bestSolution(model.get());
  if (!values)
    return std::nullopt;
  solution.values.assign(values, values + costs.size());
  solution.objective = Cbc_getObjValue(model.get());
  solution.optimal = Cbc_isProvenOptimal(model.get()) && !limited;
  solution.bound = solution.optimal ? solution.objective
                                    : Cbc_getBestPossibleObjValue(model.get());
  return solution;
}
