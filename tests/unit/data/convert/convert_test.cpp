// Text -> HDF5 shards -> text gives back the original documents; the on-disk format is what
// data/README.md describes; conversions fail cleanly and never leave a half-written dataset.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>

#include "data/files/crc32.h"
#include "data/shards/dataset.h"
#include "data/convert/convert.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;
using Documents = std::vector<std::string>;

ConvertOptions options_for(const std::vector<std::string>& inputs, const std::string& output,
                           const std::string& split) {
  ConvertOptions options;
  options.inputs = inputs;
  options.output_dir = output;
  options.split = split;
  options.val_fraction = 0;
  return options;
}

// Both splits' documents, train then val.
Documents all_documents(const TokenDataset& dataset) {
  Documents documents = test::read_documents(dataset, Split::train);
  const Documents val = test::read_documents(dataset, Split::val);
  documents.insert(documents.end(), val.begin(), val.end());
  return documents;
}

bool is_subsequence(const Documents& part, const Documents& whole) {
  std::size_t at = 0;
  for (const std::string& document : whole)
    if (at < part.size() && part[at] == document) ++at;
  return at == part.size();
}

std::vector<std::string> leftover_entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(DataConvert, FileModeRoundTripsEachFile) {
  test::ScratchDir scratch;
  test::write_file(scratch / "in/b.txt", "second file\n\nwith a blank line\n");
  test::write_file(scratch / "in/a.txt", "first file, no newline at the end");
  test::write_file(scratch / "in/sub/c.txt", "caf\xC3\xA9 in a subdirectory\n");
  test::write_file(scratch / "in/empty.txt", "  \n\n");
  // A file named as an input is read byte for byte, even one that is not text.
  const std::string binary("caf\xC3\xA9 \x00\xFF bytes\n", 15);  // UTF-8, NUL and a stray byte
  test::write_file(scratch / "raw.txt", binary);
  const ConvertReport report = convert_dataset(options_for({scratch / "in", scratch / "raw.txt"}, scratch / "out", "file"));
  EXPECT_EQ(report.documents, 4);
  const TokenDataset dataset = TokenDataset::open(scratch / "out");
  // Directory order is sorted by path: a.txt, b.txt, empty.txt (dropped), sub/c.txt.
  EXPECT_EQ(test::read_documents(dataset, Split::train),
            (Documents{"first file, no newline at the end", "second file\n\nwith a blank line\n",
                       "caf\xC3\xA9 in a subdirectory\n", binary}));
  EXPECT_TRUE(dataset.shards(Split::val).empty());
}

// Entries below a directory that are no regular file neither stop the conversion nor vanish
// unnamed: each is listed with its reason, and the files beside them are converted.
TEST(DataConvert, LinksFifosAndDevicesAreSkippedByName) {
  test::ScratchDir scratch;
  test::write_file(scratch / "in/a.txt", "the only document\n");
  fs::create_symlink(scratch / "in/loop", scratch / "in/loop");
  fs::create_symlink(scratch / "in/gone.txt", scratch / "in/dangling.txt");
  fs::create_directories(scratch / "elsewhere");
  fs::create_directory_symlink(scratch / "elsewhere", scratch / "in/linked-dir");
  ASSERT_EQ(::mkfifo((scratch / "in/pipe.txt").c_str(), 0644), 0);
  fs::create_symlink("/dev/null", scratch / "in/null");
  std::vector<std::string> messages;
  const ConvertReport report = convert_dataset(options_for({scratch / "in"}, scratch / "out", "file"),
                                               [&](const std::string& line) { messages.push_back(line); });
  EXPECT_EQ(report.documents, 1);
  std::string said;
  for (const std::string& line : messages) said += line + "\n";
  for (const std::string& part :
       {std::string("skipped 5 entries that are not regular files"), scratch / "in/dangling.txt (a dangling symbolic link)",
        scratch / "in/linked-dir (a symbolic link to a directory, not followed)",
        scratch / "in/loop (a symbolic link that cannot be resolved: Too many levels of symbolic links)",
        scratch / "in/null (a symbolic link to a device file)", scratch / "in/pipe.txt (a FIFO)"})
    EXPECT_NE(said.find(part), std::string::npos) << "expected \"" << part << "\" in:\n" << said;
}

TEST(DataConvert, BlankLineModeRoundTripsParagraphs) {
  test::ScratchDir scratch;
  test::write_file(scratch / "book.txt", "Chapter one.\nIt begins.\n\n\nChapter two.\n \nThe end.\n");
  convert_dataset(options_for({scratch / "book.txt"}, scratch / "out", "blank-line"));
  EXPECT_EQ(test::read_documents(TokenDataset::open(scratch / "out"), Split::train),
            (Documents{"Chapter one.\nIt begins.\n", "Chapter two.\n", "The end.\n"}));
}

TEST(DataConvert, MarkerModeRoundTripsFortuneStyleFiles) {
  test::ScratchDir scratch;
  test::write_file(scratch / "in/jokes", "Joke one.\n%\nJoke two,\n  two lines.\n%\n%\nJoke three.\n%\n");
  test::write_file(scratch / "in/jokes.dat", "binary index that must be skipped");
  test::write_file(scratch / "in/quotes", "\"Quote.\"\n\t-- Someone\n%\n");
  ConvertOptions options = options_for({scratch / "in"}, scratch / "out", "line:%");
  options.exclude = {"*.dat"};
  const ConvertReport report = convert_dataset(options);
  EXPECT_EQ(report.documents, 4);
  EXPECT_EQ(report.bytes_read, static_cast<std::int64_t>(fs::file_size(scratch / "in/jokes") +
                                                         fs::file_size(scratch / "in/quotes")));
  const TokenDataset dataset = TokenDataset::open(scratch / "out");
  EXPECT_EQ(test::read_documents(dataset, Split::train),
            (Documents{"Joke one.\n", "Joke two,\n  two lines.\n", "Joke three.\n", "\"Quote.\"\n\t-- Someone\n"}));
  // Each document is its bytes plus one EOS.
  EXPECT_EQ(report.train_tokens, 10 + 23 + 12 + 21 + 4);
  EXPECT_EQ(dataset.tokens(Split::train), report.train_tokens);
}

TEST(DataConvert, WithoutEosTheStreamIsTheDocumentsConcatenated) {
  test::ScratchDir scratch;
  test::write_file(scratch / "t.txt", "ab\n%\ncd\n");
  ConvertOptions options = options_for({scratch / "t.txt"}, scratch / "out", "line:%");
  options.eos = EosMode::none;
  convert_dataset(options);
  const TokenDataset dataset = TokenDataset::open(scratch / "out");
  EXPECT_EQ(dataset.read_all(Split::train), (std::vector<std::int32_t>{'a', 'b', '\n', 'c', 'd', '\n'}));
  EXPECT_EQ(test::read_documents(dataset, Split::train), (Documents{"ab\n", "cd\n"}));
}

TEST(DataConvert, SmallShardsSplitDocumentsAcrossFilesAndStillRoundTrip) {
  test::ScratchDir scratch;
  Documents expected;
  std::string text;
  for (int i = 0; i < 40; ++i) {
    expected.push_back("document number " + std::to_string(i) + std::string(i % 9, '!') + "\n");
    text += expected.back() + "%\n";
  }
  test::write_file(scratch / "many.txt", text);
  ConvertOptions options = options_for({scratch / "many.txt"}, scratch / "out", "line:%");
  options.shard_tokens = 7;
  const ConvertReport report = convert_dataset(options);
  const TokenDataset dataset = TokenDataset::open(scratch / "out");
  const auto& shards = dataset.shards(Split::train);
  ASSERT_GT(shards.size(), 100u);
  EXPECT_EQ(report.shards, static_cast<int>(shards.size()));
  std::int64_t documents = 0;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    EXPECT_EQ(shards[i].file, fmt::format("train-{:05d}.h5", i));
    if (i + 1 < shards.size()) {
      EXPECT_EQ(shards[i].tokens, 7) << shards[i].file;
    }
    EXPECT_LE(shards[i].tokens, 7);
    documents += shards[i].documents;
  }
  EXPECT_EQ(documents, 40);
  EXPECT_EQ(test::read_documents(dataset, Split::train), expected);
}

TEST(DataConvert, ValidationHoldsOutDocumentsDeterministically) {
  test::ScratchDir scratch;
  Documents expected;
  std::string text;
  for (int i = 0; i < 400; ++i) {
    expected.push_back("entry " + std::to_string(i) + "\n");
    text += expected.back() + "%\n";
  }
  test::write_file(scratch / "in.txt", text);
  ConvertOptions options = options_for({scratch / "in.txt"}, scratch / "a", "line:%");
  options.val_fraction = 0.25;
  const ConvertReport report = convert_dataset(options);
  const TokenDataset a = TokenDataset::open(scratch / "a");
  const Documents train = test::read_documents(a, Split::train);
  const Documents val = test::read_documents(a, Split::val);
  // Each split keeps file order, and together they hold every document exactly once.
  EXPECT_TRUE(is_subsequence(train, expected));
  EXPECT_TRUE(is_subsequence(val, expected));
  Documents together = all_documents(a);
  std::sort(together.begin(), together.end());
  Documents sorted_expected = expected;
  std::sort(sorted_expected.begin(), sorted_expected.end());
  EXPECT_EQ(together, sorted_expected);
  // 100 expected; a binomial(400, 0.25) count lies within 60..140 with overwhelming probability.
  EXPECT_GT(val.size(), 60u);
  EXPECT_LT(val.size(), 140u);
  EXPECT_EQ(report.val_tokens, a.tokens(Split::val));

  options.output_dir = scratch / "b";
  convert_dataset(options);
  EXPECT_EQ(test::read_documents(TokenDataset::open(scratch / "b"), Split::val), val);
  options.output_dir = scratch / "c";
  options.seed += 1;
  convert_dataset(options);
  EXPECT_NE(test::read_documents(TokenDataset::open(scratch / "c"), Split::val), val);
}

TEST(DataConvert, ManifestAndShardAttributesDescribeTheData) {
  test::ScratchDir scratch;
  test::write_file(scratch / "t.txt", "hello\n%\nworld!\n%\n");
  const ConvertReport report = convert_dataset(options_for({scratch / "t.txt"}, scratch / "out", "line:%"));
  const nlohmann::json manifest = nlohmann::json::parse(test::read_file(scratch / "out/manifest.json"));
  EXPECT_EQ(manifest["format_version"], 1);
  EXPECT_EQ(manifest["format_minor"], 1);
  EXPECT_EQ(manifest["compression"], "none");
  EXPECT_EQ(manifest["tokenizer"]["kind"], "byte");
  EXPECT_EQ(manifest["tokenizer"]["name"], "byte");
  EXPECT_EQ(manifest["tokenizer"]["vocab_size"], 257);
  EXPECT_EQ(manifest["tokenizer"]["eos_id"], 256);
  ASSERT_EQ(manifest["splits"]["train"].size(), 1u);
  EXPECT_TRUE(manifest["splits"]["val"].empty());
  const nlohmann::json& shard = manifest["splits"]["train"][0];
  const std::string path = scratch / ("out/" + shard["file"].get<std::string>());
  EXPECT_EQ(shard["tokens"], 6 + 7 + 2);
  EXPECT_EQ(shard["documents"], 2);
  EXPECT_EQ(shard["bytes"], fs::file_size(path));
  EXPECT_EQ(shard["checksum"], crc32_label(crc32_of_file(path)));
  EXPECT_EQ(report.train_tokens, 15);

  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const auto int_attribute = [&](const char* name) {
    std::int64_t value = -1;
    const hid_t attribute = H5Aopen(file, name, H5P_DEFAULT);
    EXPECT_GE(H5Aread(attribute, H5T_NATIVE_INT64, &value), 0) << name;
    H5Aclose(attribute);
    return value;
  };
  const auto string_attribute = [&](const char* name) {
    const hid_t attribute = H5Aopen(file, name, H5P_DEFAULT);
    const hid_t type = H5Aget_type(attribute);
    std::string value(H5Tget_size(type), '\0');
    EXPECT_GE(H5Aread(attribute, type, value.data()), 0) << name;
    H5Tclose(type);
    H5Aclose(attribute);
    return value.substr(0, value.find('\0'));
  };
  EXPECT_EQ(int_attribute("format_version"), 1);
  EXPECT_EQ(int_attribute("format_minor"), 1);
  EXPECT_EQ(string_attribute("tokenizer_kind"), "byte");
  EXPECT_EQ(int_attribute("vocab_size"), 257);
  EXPECT_EQ(int_attribute("eos_id"), 256);
  EXPECT_EQ(int_attribute("token_count"), 15);
  EXPECT_EQ(string_attribute("tokenizer"), "byte");
  EXPECT_NE(string_attribute("source").find("t.txt"), std::string::npos);

  const hid_t tokens = H5Dopen2(file, "tokens", H5P_DEFAULT);
  const hid_t type = H5Dget_type(tokens);
  EXPECT_EQ(H5Tget_class(type), H5T_INTEGER);
  EXPECT_EQ(H5Tget_size(type), 2u);
  EXPECT_EQ(H5Tget_sign(type), H5T_SGN_NONE);
  const hid_t create = H5Dget_create_plist(tokens);
  EXPECT_EQ(H5Pget_layout(create), H5D_CHUNKED);
  std::vector<std::uint16_t> stored(15);
  EXPECT_GE(H5Dread(tokens, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, stored.data()), 0);
  EXPECT_EQ(stored, (std::vector<std::uint16_t>{'h', 'e', 'l', 'l', 'o', '\n', 256, 'w', 'o', 'r', 'l', 'd', '!', '\n', 256}));
  H5Pclose(create);
  H5Tclose(type);
  H5Dclose(tokens);

  const hid_t offsets = H5Dopen2(file, "doc_offsets", H5P_DEFAULT);
  std::vector<std::uint64_t> starts(3);
  EXPECT_GE(H5Dread(offsets, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, starts.data()), 0);
  EXPECT_EQ(starts, (std::vector<std::uint64_t>{0, 7, 15}));
  H5Dclose(offsets);
  H5Fclose(file);
}

TEST(DataConvert, ShardsAreReadableByH5ls) {
  if (std::system("command -v h5ls > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "h5ls not found on PATH (install hdf5-tools); cannot check shards with it";
  test::ScratchDir scratch;
  test::write_file(scratch / "t.txt", "some text\n\nmore text\n");
  convert_dataset(options_for({scratch / "t.txt"}, scratch / "out", "blank-line"));
  const std::string listing = scratch / "listing.txt";
  const std::string command = "h5ls -r '" + (scratch / "out/train-00000.h5") + "' > '" + listing + "' 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << test::read_file(listing);
  const std::string text = test::read_file(listing);
  // 20 bytes of text + 2 EOS tokens; 2 document starts + the final offset.
  EXPECT_NE(text.find("Dataset {22}"), std::string::npos) << text;
  EXPECT_NE(text.find("Dataset {3}"), std::string::npos) << text;
  EXPECT_NE(text.find("/tokens"), std::string::npos) << text;
  EXPECT_NE(text.find("/doc_offsets"), std::string::npos) << text;
}

TEST(DataConvert, RefusesANonEmptyOutputDirectoryButFillsAnEmptyOne) {
  test::ScratchDir scratch;
  test::write_file(scratch / "t.txt", "text\n");
  test::write_file(scratch / "taken/keep.me", "precious");
  test::expect_user_error([&] { convert_dataset(options_for({scratch / "t.txt"}, scratch / "taken", "file")); },
                          {scratch / "taken", "not empty"});
  EXPECT_EQ(test::read_file(scratch / "taken/keep.me"), "precious");
  fs::create_directories(scratch / "empty");
  convert_dataset(options_for({scratch / "t.txt"}, scratch / "empty", "file"));
  EXPECT_EQ(TokenDataset::open(scratch / "empty").tokens(Split::train), 6);
}

TEST(DataConvert, MissingOrEmptyInputsAreUserErrors) {
  test::ScratchDir scratch;
  test::expect_user_error([&] { convert_dataset(options_for({scratch / "nope"}, scratch / "out", "file")); },
                          {scratch / "nope", "does not exist"});
  fs::create_directories(scratch / "dir");
  test::write_file(scratch / "dir/x.dat", "skipped");
  ConvertOptions options = options_for({scratch / "dir"}, scratch / "out", "file");
  options.exclude = {"*.dat"};
  test::expect_user_error([&] { convert_dataset(options); }, {"no input files", scratch / "dir"});
  test::write_file(scratch / "dir/blank.txt", " \n\n\t\n");
  test::expect_user_error([&] { convert_dataset(options); }, {"no documents"});
  options.split = "sentences";
  test::expect_user_error([&] { convert_dataset(options); }, {"sentences"});
  EXPECT_EQ(leftover_entries(scratch.path()), (std::vector<std::string>{"dir"}));
}

TEST(DataConvert, InputVanishingMidwayLeavesNoOutput) {
  test::ScratchDir scratch;
  test::write_file(scratch / "in/1.txt", "first\n");
  test::write_file(scratch / "in/2.txt", "second\n");
  test::write_file(scratch / "in/3.txt", "third\n");
  // The "converting" line comes after the inputs are listed and before they are read.
  bool removed = false;
  const auto remove_last_input = [&](const std::string& line) {
    if (removed || !line.starts_with("converting")) return;
    fs::remove(scratch / "in/3.txt");
    removed = true;
  };
  test::expect_user_error(
      [&] { convert_dataset(options_for({scratch / "in"}, scratch / "out", "file"), remove_last_input); },
      {scratch / "in/3.txt"});
  EXPECT_TRUE(removed);
  EXPECT_FALSE(fs::exists(scratch / "out"));
  EXPECT_EQ(leftover_entries(scratch.path()), (std::vector<std::string>{"in"}));
}

TEST(DataConvert, ExceptionFromProgressCallbackLeavesNoOutput) {
  test::ScratchDir scratch;
  test::write_file(scratch / "in.txt", "text\n");
  // Thrown once the temporary output directory exists.
  const auto interrupt = [](const std::string& line) {
    if (line.starts_with("converting")) throw std::runtime_error("interrupted");
  };
  EXPECT_THROW(convert_dataset(options_for({scratch / "in.txt"}, scratch / "out", "file"), interrupt),
               std::runtime_error);
  EXPECT_EQ(leftover_entries(scratch.path()), (std::vector<std::string>{"in.txt"}));
}

// The summary is the caller's to print (from the report), so that it appears once.
TEST(DataConvert, ProgressReportsTheStartAndLeavesTheSummaryToTheCaller) {
  test::ScratchDir scratch;
  test::write_file(scratch / "in.txt", "text\n");
  std::vector<std::string> lines;
  const ConvertReport report = convert_dataset(options_for({scratch / "in.txt"}, scratch / "out", "file"),
                                               [&](const std::string& line) { lines.push_back(line); });
  ASSERT_GE(lines.size(), 2u);
  EXPECT_NE(lines.front().find("input format text"), std::string::npos) << lines.front();
  EXPECT_NE(lines[1].find("converting 1 input"), std::string::npos) << lines[1];
  for (const std::string& line : lines) {
    EXPECT_EQ(line.find_first_of("\r\n"), std::string::npos) << line;
    EXPECT_FALSE(line.starts_with("wrote")) << line;
  }
  EXPECT_EQ(report.documents, 1);
}

// The quickstart corpus, where installed: Debian's fortune files.
TEST(DataConvert, FortunesCorpusConverts) {
  const std::string corpus = "/usr/share/games/fortunes";
  if (!fs::is_directory(corpus)) GTEST_SKIP() << corpus << " not installed (Debian package fortunes)";
  std::int64_t text_bytes = 0;
  for (const auto& entry : fs::directory_iterator(corpus)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && !name.ends_with(".dat") && !name.ends_with(".u8"))
      text_bytes += static_cast<std::int64_t>(entry.file_size());
  }
  test::ScratchDir scratch;
  ConvertOptions options = options_for({corpus}, scratch / "fortunes", "line:%");
  options.val_fraction = 0.05;
  options.exclude = {"*.dat", "*.u8"};
  const ConvertReport report = convert_dataset(options);
  EXPECT_EQ(report.bytes_read, text_bytes);
  const TokenDataset dataset = TokenDataset::open(scratch / "fortunes");
  EXPECT_EQ(dataset.tokens(Split::train), report.train_tokens);
  EXPECT_EQ(dataset.tokens(Split::val), report.val_tokens);
  EXPECT_GT(report.val_tokens, 0);
  // Separator lines ("%\n", 2 bytes each) leave the stream and each document gains an EOS, so
  // tokens can exceed bytes by at most one per document.
  EXPECT_LE(report.train_tokens + report.val_tokens, text_bytes + report.documents);
  EXPECT_EQ(dataset.read_all(Split::val).size(), static_cast<std::size_t>(report.val_tokens));
  std::printf("fortunes: %lld documents, %.2f MB in %.3f s (%.1f MB/s)\n",
              static_cast<long long>(report.documents), report.bytes_read / 1e6, report.seconds,
              report.bytes_read / 1e6 / report.seconds);
}

}  // namespace
}  // namespace ustrain
