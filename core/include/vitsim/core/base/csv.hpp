#pragma once
// CSV as RFC 4180 writes it, for every CSV vitsim writes (predict's and plan's --format csv) and reads (fit's
// and --runs' measured times): a cell holding a comma, a double quote, a carriage return or a newline is
// quoted, its double quotes doubled; a file name with a quote or a newline in it no longer shifts or splits
// the row (issue 39 item 10).
#include <string>
#include <string_view>
#include <vector>

#include "vitsim/core/base/error.hpp"

namespace vitsim {

// The cell as written: bare where it can be, else quoted with its quotes doubled (also where it starts or
// ends with a space or a tab, which a bare cell loses to the reader's trimming, or starts with '#').
std::string csv_cell(std::string_view value);
// The cell always quoted (a column whose cells are free text, as plan's `excluded`), quotes doubled.
std::string csv_quoted(std::string_view value);

// One record of a CSV text, as RFC 4180 reads it, from `pos` (moved past the record and its line end).
struct CsvRecord {
  std::vector<std::string> fields;
  std::vector<bool> quoted;  // per field: written in quotes (its spaces kept, its value taken as written)
  int line = 0;              // the line the record starts on, 1-based
};
// Reads the record at `pos` of `text`; `line` is the line `pos` is on and is moved past the record's lines.
// A field's spaces and tabs around it are trimmed unless quoted; a line ending in "\r\n" ends as "\n" does.
// Throws Error(Origin{path, line}) for a quote not closed before the end of the text, or text after a closing
// quote before the next comma.
CsvRecord read_csv_record(const std::string& text, size_t& pos, int& line, const std::string& path);

}  // namespace vitsim
