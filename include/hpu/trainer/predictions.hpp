// Predictions: what predict_step returns for a batch and Trainer::predict for
// a whole data set, and the files they are written to.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace hpu {

// A table with a row per sample and a number per named column.
struct Predictions {
  std::vector<std::string> columns;
  std::vector<double> values;  // row-major: rows() x columns.size()
  size_t rows() const { return columns.empty() ? 0 : values.size() / columns.size(); }
  // Appends the rows of `more`, which must have the same columns (hpu::Error
  // HPU_ERROR_INVALID_ARGUMENT naming both lists otherwise).
  void append(const Predictions &more);
};

// Writes `p` to `path` in the format the path's extension names, atomically
// (a reader sees no partial file) and creating missing parent folders:
//   .csv  a header of the column names, then one line per row; integral
//         values are written as integers, others with as many digits as give
//         the same float (or double) back.
//   .npy  a float64 array [rows, columns], the columns in the CSV's order.
// hpu::Error: HPU_ERROR_UNSUPPORTED naming the extension and the supported
// ones for any other; HPU_ERROR_IO naming the path when it cannot be written.
void write_predictions(const std::string &path, const Predictions &p);
// write_predictions' check of the extension alone (before a long prediction).
void check_predictions_path(const std::string &path);

}  // namespace hpu
