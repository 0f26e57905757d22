// The model's own error on the public corpus (issue 37 item 3; core/results/corpus_error.hpp): the table's
// reader, the band with each origin one vote (CDF pooling) and leave one origin out. Every number below is
// worked by hand from the rows the test writes (predicted 1 s, measured the ratio).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/results/corpus_error.hpp"

using namespace vitsim;
using Catch::Contains;

namespace {
// a: two rows (x0.5, x2), b: one (x1), c: one (x4). Each origin one vote: a's rows weigh 1/6 each, b's and
// c's 1/3. In order x0.5 (1/6), x1 (1/2), x2 (2/3), x4 (1): p10 is x0.5 (the first to reach 0.1), p90 x4.
const char* const kTable =
    "# origin file line measured_s predicted_s\n"
    "a a.txt 3 0.5 1\n"
    "a a.txt 4 2 1\n"
    "\n"
    "b b.txt 7 1 1\n"
    "c c.txt 9 4 1\n";
}  // namespace

TEST_CASE("the corpus band weighs each origin once", "[corpus_error]") {
  const CorpusError e = read_corpus_error("t.txt", kTable);
  REQUIRE(e.rows.size() == 4);
  CHECK(e.rows[2].line == 7);
  CHECK(e.origins() == std::vector<std::string>{"a", "b", "c"});
  const CorpusBand all = corpus_band(e, 0.1, 0.9);
  CHECK(all.ratio_low == Approx(0.5));
  CHECK(all.ratio_high == Approx(4));
  CHECK(all.rows == 4);
  CHECK(all.origins == 3);
  // Without c: a's rows 1/4 each, b's 1/2: x0.5 (1/4), x1 (3/4), x2 (1): p90 is x2.
  const CorpusBand no_c = corpus_band(e, 0.1, 0.9, "c");
  CHECK(no_c.ratio_low == Approx(0.5));
  CHECK(no_c.ratio_high == Approx(2));
  CHECK(no_c.origins == 2);
  // Without a: b and c half each: p10 x1, p90 x4.
  const CorpusBand no_a = corpus_band(e, 0.1, 0.9, "a");
  CHECK(no_a.ratio_low == Approx(1));
  CHECK(no_a.ratio_high == Approx(4));
}

TEST_CASE("leaving one origin out judges its rows in the others' band", "[corpus_error]") {
  // a out: band x1..x4 holds x2, not x0.5 (1 of 2); b out: a 1/4 each, c 1/2: x0.5..x4 holds x1 (1 of 1);
  // c out: x0.5..x2 misses x4 (0 of 1). Held 2 of 4; only b held 80% of its rows. Widths 3, 3.5, 1.5:
  // median 3.
  const CorpusHoldout h = corpus_holdout(read_corpus_error("t.txt", kTable), 0.1, 0.9);
  CHECK(h.held == 2);
  CHECK(h.rows == 4);
  CHECK(h.level() == Approx(0.5));
  CHECK(h.origins_held == 1);
  CHECK(h.origins == 3);
  CHECK(h.median_width == Approx(3));
}

TEST_CASE("a bad corpus table is refused naming its line and field", "[corpus_error]") {
  struct Bad {
    const char* text;
    const char* want;
  };
  for (const Bad& b : {
           Bad{"a a.txt 3 0.5 1\nb.txt 4 1 1\n", "t.txt:2: 4 fields where a row has 5"},  // no origin
           Bad{"a a.txt 3 0.5 1\nb b.txt x 1 1\n", "t.txt:2: line: 'x'"},
           Bad{"a a.txt 3 0.5 1\nb b.txt 4 -1 1\n", "t.txt:2: measured_s:"},
           Bad{"a a.txt 3 0.5 1\nb b.txt 4 1 0\n", "t.txt:2: predicted_s:"},
           Bad{"a a.txt 3 0.5 1\nb b.txt 4 1e300 1e-300\n", "t.txt:2: measured"},  // ratio past 1e12
           Bad{"a a.txt 3 0.5 1\na a.txt 4 1 1\n", "t.txt: 1 origin (2 rows)"},
       }) {
    INFO(b.text);
    CHECK_THROWS_WITH(read_corpus_error("t.txt", b.text), Contains(b.want));
  }
}

TEST_CASE("the shipped table reads, with every corpus origin", "[corpus_error]") {
  // data/corpus_residuals.txt as compiled in; the ctest corpus_residuals checks it against the corpus files.
  const CorpusError& e = shipped_corpus_error();
  CHECK(e.origins().size() >= 2);
  const CorpusBand b = corpus_band(e, 0.1, 0.9);
  CHECK(b.ratio_low <= b.ratio_high);
  CHECK(b.rows == static_cast<int>(e.rows.size()));
}
