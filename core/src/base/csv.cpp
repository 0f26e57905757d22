// CSV as RFC 4180 writes it (vitsim/core/base/csv.hpp).
#include "vitsim/core/base/csv.hpp"

#include <fmt/format.h>

#include "vitsim/core/base/units.hpp"

namespace vitsim {

std::string csv_quoted(std::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string csv_cell(std::string_view value) {
  // Spaces and tabs at either end are quoted too: the reader trims them from a bare cell. A '#' first is
  // quoted: a line starting with it is a comment to the measured-times reader.
  const bool edge = !value.empty() && (value.front() == ' ' || value.front() == '\t' || value.back() == ' ' ||
                                       value.back() == '\t' || value.front() == '#');
  if (!edge && value.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(value);
  return csv_quoted(value);
}

CsvRecord read_csv_record(const std::string& text, size_t& pos, int& line, const std::string& path) {
  CsvRecord r;
  r.line = line;
  auto blank = [](char c) { return c == ' ' || c == '\t'; };
  for (;;) {  // one field per turn
    while (pos < text.size() && blank(text[pos])) ++pos;
    std::string field;
    bool quoted = false;
    if (pos < text.size() && text[pos] == '"') {
      quoted = true;
      const int opened = line;
      ++pos;
      for (;;) {
        if (pos >= text.size())
          throw Error(Origin{path, opened}, "a quoted field is not closed: its closing '\"' is missing");
        const char c = text[pos++];
        if (c == '"') {
          if (pos < text.size() && text[pos] == '"') {
            field += '"';
            ++pos;
            continue;
          }
          break;
        }
        if (c == '\n') ++line;
        field += c;
      }
      while (pos < text.size() && (blank(text[pos]) || text[pos] == '\r')) ++pos;
      if (pos < text.size() && text[pos] != ',' && text[pos] != '\n')
        throw Error(Origin{path, line},
                    fmt::format("text after the closing quote of \"{}\": a quoted field ends at its quote "
                                "(a quote inside is written twice, \"\")",
                                echo(field)));
    } else {
      const size_t end = text.find_first_of(",\n", pos);
      field = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
      pos = end == std::string::npos ? text.size() : end;
      while (!field.empty() && (blank(field.back()) || field.back() == '\r')) field.pop_back();
    }
    r.fields.push_back(std::move(field));
    r.quoted.push_back(quoted);
    if (pos >= text.size()) return r;
    if (text[pos++] == '\n') {
      ++line;
      return r;
    }
  }
}

}  // namespace vitsim
