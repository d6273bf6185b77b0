// How text is cut into documents, for each split mode, whatever the chunking of the input.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/inputs/document_splitter.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

using Documents = std::vector<std::string>;

// Splits each file's text, fed in pieces of `chunk` bytes.
Documents split(const std::string& mode, const std::vector<std::string>& files, std::size_t chunk = 1 << 20,
                std::int64_t max_document_bytes = kDefaultMaxDocumentBytes) {
  DocumentSplitter splitter(mode, max_document_bytes);
  Documents documents;
  const DocumentSplitter::Sink sink = [&](std::string_view d, std::int64_t, std::int64_t) { documents.emplace_back(d); };
  for (std::size_t file = 0; file < files.size(); ++file) {
    const std::string& text = files[file];
    splitter.begin_file("file" + std::to_string(file) + ".txt");
    for (std::size_t at = 0; at < text.size(); at += chunk)
      splitter.feed(std::string_view(text).substr(at, chunk), sink);
    splitter.end_file(sink);
  }
  return documents;
}

TEST(DataDocumentSplitter, FileModeKeepsEachFileWholeAndDropsBlankFiles) {
  EXPECT_EQ(split("file", {"one\n\ntwo\n", " \n\t\n", "three"}), (Documents{"one\n\ntwo\n", "three"}));
}

TEST(DataDocumentSplitter, BlankLineModeCutsAtRunsOfBlankLines) {
  const std::string text = "\n\npara one\nline two\n\n \t\n\r\npara two\r\n\r\npara three";
  EXPECT_EQ(split("blank-line", {text}), (Documents{"para one\nline two\n", "para two\r\n", "para three"}));
}

TEST(DataDocumentSplitter, MarkerModeCutsAtMarkerLinesOnly) {
  const std::string text = "%\nfirst\n  % not a marker\n%%\n%\n%\n  \n%\nsecond\r\n%\r\nthird";
  EXPECT_EQ(split("line:%", {text}), (Documents{"first\n  % not a marker\n%%\n", "second\r\n", "third"}));
  EXPECT_EQ(split("line:---", {"a\n---\nb\n---"}), (Documents{"a\n", "b\n"}));
}

TEST(DataDocumentSplitter, DocumentsNeverSpanFiles) {
  EXPECT_EQ(split("blank-line", {"end of a", "start of b\n"}), (Documents{"end of a", "start of b\n"}));
  EXPECT_EQ(split("line:%", {"a\n%\nb", "c\n"}), (Documents{"a\n", "b", "c\n"}));
}

TEST(DataDocumentSplitter, ChunkBoundariesDoNotChangeTheResult) {
  const std::string text = "alpha\nbeta\n%\ngamma\r\n%\r\n\n%\ndelta epsilon\n%";
  const Documents whole = split("line:%", {text});
  ASSERT_EQ(whole, (Documents{"alpha\nbeta\n", "gamma\r\n", "delta epsilon\n"}));
  for (std::size_t chunk : {1, 2, 3, 5, 7, 13}) EXPECT_EQ(split("line:%", {text}, chunk), whole) << chunk;
  const std::string paragraphs = "a b\nc\n\n\nd\n \ne";
  for (std::size_t chunk : {1, 2, 4}) EXPECT_EQ(split("blank-line", {paragraphs}, chunk), (Documents{"a b\nc\n", "d\n", "e"}));
}

TEST(DataDocumentSplitter, EachDocumentComesWithItsNumberInTheFileAndItsFirstLine) {
  std::vector<std::pair<std::int64_t, std::int64_t>> places;
  const DocumentSplitter::Sink sink = [&](std::string_view, std::int64_t number, std::int64_t line) {
    places.emplace_back(number, line);
  };
  DocumentSplitter splitter("blank-line", kDefaultMaxDocumentBytes);
  for (const char* text : {"\n\none\ntwo\n\n \n\nthree\n", "four\n\n\nfive"}) {
    splitter.begin_file("a.txt");
    splitter.feed(text, sink);
    splitter.end_file(sink);
  }
  EXPECT_EQ(places, (std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 3}, {2, 8}, {1, 1}, {2, 4}}));
}

TEST(DataDocumentSplitter, UnknownModeIsAUserError) {
  test::expect_user_error([] { DocumentSplitter("paragraph", kDefaultMaxDocumentBytes); },
                          {"paragraph", "line:<MARKER>"});
}

TEST(DataDocumentSplitter, DocumentsUpToTheMaximumSizeAreKept) {
  const std::string forty = std::string(39, 'x') + "\n";
  EXPECT_EQ(split("blank-line", {forty + forty + "\n" + forty}, 7, 80), (Documents{forty + forty, forty}));
  EXPECT_EQ(split("file", {forty + forty}, 3, 80), (Documents{forty + forty}));
}

// The error comes while the document grows, so a file without separators is not held whole.
TEST(DataDocumentSplitter, ALongerDocumentIsAnErrorNamingTheFileTheDocumentAndItsLine) {
  const std::string forty = std::string(39, 'x') + "\n";
  const std::string text = "one\n\ntwo\n\n\n" + forty + forty + forty + "\nfour\n";
  for (std::size_t chunk : {std::size_t{1}, std::size_t{16}, std::size_t{1} << 20})
    test::expect_user_error([&] { split("blank-line", {"short", text}, chunk, 100); },
                            {"file1.txt: document 3 of the file (from line 6) is longer than the maximum document "
                             "size, 100 bytes",
                             "no blank line separates it", "--max-document-mib"});
  const std::string no_newline(300, 'y');  // one line that never ends
  test::expect_user_error([&] { split("line:%", {"%\n" + no_newline}, 64, 100); },
                          {"file0.txt: document 1 of the file (from line 2)", "no line '%' separates it"});
  test::expect_user_error([&] { split("file", {no_newline}, 64, 100); },
                          {"file0.txt: document 1 of the file (from line 1)", "--split file makes each file one"});
}

}  // namespace
}  // namespace ustrain
