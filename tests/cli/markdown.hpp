#pragma once
// Reading the manual's Markdown the way GitHub renders it: the lines outside fenced code blocks, the fenced
// blocks themselves, and each heading's anchor. Shared by the link check (test_descriptors.cpp) and the
// anchors named in code and the command lines of the manual (test_usage_docs.cpp).
#include <cctype>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace vt::md {

// The lines of a Markdown page outside (code == false) or inside (code == true) fenced code blocks.
inline std::vector<std::string> lines(const std::string& md, bool code) {
  std::vector<std::string> out;
  std::istringstream in(md);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) {
      inside = !inside;
      continue;
    }
    if (inside == code) out.push_back(line);
  }
  return out;
}

inline std::vector<std::string> prose_lines(const std::string& md) {
  return lines(md, false);
}

// GitHub's anchor of a heading: lower case, punctuation dropped, each space a '-'.
inline std::string anchor_of(const std::string& heading) {
  std::string out;
  for (unsigned char c : heading) {
    if (std::isalnum(c) || c == '-' || c == '_')
      out += static_cast<char>(std::tolower(c));
    else if (c == ' ')
      out += '-';
  }
  return out;
}

// The anchors of a page's headings (levels 1 to 6, outside code blocks).
inline std::set<std::string> anchors(const std::string& md) {
  std::set<std::string> out;
  for (const auto& line : prose_lines(md)) {
    const auto text = line.find_first_not_of('#');
    if (text == 0 || text == std::string::npos || text > 6 || line[text] != ' ') continue;
    out.insert(anchor_of(line.substr(text + 1)));
  }
  return out;
}

// What a text may name as a section of a page (docs/X.md "Heading"), as anchors: each heading, also
// without a closing parenthesis ("Catalogue" for "## Catalogue (data/catalogue.json, ...)"), and each
// paragraph or list item's bold lead (indented too), the manual's named paragraphs ("Link transports" for
// "- **Link transports.** A link's ...").
inline std::set<std::string> sections(const std::string& md) {
  std::set<std::string> out = anchors(md);
  for (const auto& line : prose_lines(md)) {
    const auto text = line.find_first_not_of('#');
    if (text != 0 && text != std::string::npos && text <= 6 && line[text] == ' ') {
      const auto paren = line.find(" (", text);
      if (paren != std::string::npos && line.back() == ')')
        out.insert(anchor_of(line.substr(text + 1, paren - text - 1)));
    }
    const auto indent = line.find_first_not_of(' ');
    const std::string from = indent == std::string::npos ? "" : line.substr(indent);
    const std::string lead = from.rfind("- **", 0) == 0 ? from.substr(4)
                             : from.rfind("**", 0) == 0 ? from.substr(2)
                                                        : "";
    const auto close = lead.find("**");
    if (close != std::string::npos && close > 0) {
      std::string name = lead.substr(0, close);
      while (!name.empty() && (name.back() == '.' || name.back() == ':')) name.pop_back();
      out.insert(anchor_of(name));
    }
  }
  return out;
}

}  // namespace vt::md
