// TensorBoard event files: CRC-32C against published check values, the TFRecord framing
// against records framed by an independent CRC-32C implementation (Python's crcmod), the
// event file's name and events, and our protobuf beside sentencepiece's in one process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/tensorboard/crc32c.h"
#include "core/tensorboard/event_file.h"
#include "core/tensorboard/tfrecord.h"
#include "data/tokenizers/tokenizer.h"
#include "data/convert/tokenizer_training.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

std::string bytes_of(std::initializer_list<unsigned> values) {
  std::string s;
  for (unsigned v : values) s.push_back(static_cast<char>(v));
  return s;
}

std::uint32_t le32(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

std::uint64_t le64(const std::string& s, std::size_t at) {
  return le32(s, at) | (std::uint64_t{le32(s, at + 4)} << 32);
}

TEST(Crc32c, MatchesTheStandardCheckValues) {
  // The catalogued check value of CRC-32C, and two of RFC 3720's iSCSI test vectors.
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(crc32c(""), 0u);
}

TEST(TfRecord, MaskRotatesAndOffsetsTheCrc) {
  // ((0xE3069283 >> 15) | (0xE3069283 << 17)) + 0xa282ead8, modulo 2^32.
  EXPECT_EQ(tfrecord_masked_crc("123456789"), 0xC78AB0E5u);
  EXPECT_EQ(tfrecord_masked_crc(""), 0xA282EAD8u);
}

TEST(TfRecord, FramesLikeAnIndependentImplementation) {
  EXPECT_EQ(tfrecord_frame("abc"), bytes_of({0x03, 0, 0, 0, 0, 0, 0, 0, 0xb0, 0x99, 0x49, 0x0e, 'a', 'b', 'c',
                                             0x6e, 0x57, 0xf1, 0x21}));
  EXPECT_EQ(tfrecord_frame(""), bytes_of({0, 0, 0, 0, 0, 0, 0, 0, 0x29, 0x03, 0x98, 0x07, 0xd8, 0xea, 0x82, 0xa2}));
  const std::string data(300, 'x');  // a length above one byte
  const std::string record = tfrecord_frame(data);
  ASSERT_EQ(record.size(), data.size() + 16);
  EXPECT_EQ(le64(record, 0), 300u);
  EXPECT_EQ(le32(record, 8), tfrecord_masked_crc(record.substr(0, 8)));
  EXPECT_EQ(record.substr(12, 300), data);
  EXPECT_EQ(le32(record, 312), tfrecord_masked_crc(data));
}

// The payloads of a file of TFRecords, checking both CRCs of each.
std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string file = ss.str();
  std::vector<std::string> payloads;
  for (std::size_t at = 0; at < file.size();) {
    EXPECT_LE(at + 12, file.size()) << "torn record header";
    const std::uint64_t length = le64(file, at);
    EXPECT_EQ(le32(file, at + 8), tfrecord_masked_crc(file.substr(at, 8))) << "length CRC at " << at;
    EXPECT_LE(at + 16 + length, file.size()) << "torn record";
    if (at + 16 + length > file.size()) break;
    const std::string payload = file.substr(at + 12, length);
    EXPECT_EQ(le32(file, at + 12 + length), tfrecord_masked_crc(payload)) << "data CRC at " << at;
    payloads.push_back(payload);
    at += 16 + length;
  }
  return payloads;
}

class EventFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One directory per test: CTest runs the tests of this fixture in parallel processes.
    dir_ = ::testing::TempDir() + "ustrain_event_file_test_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(EventFileTest, IsNamedForTensorBoardAndOpensWithVersionAndStart) {
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  std::string path;
  {
    EventFile file(dir_, 7);
    path = file.path();
    file.write_scalars(7, 1.5, {{"train/loss", 2.0}, {"train/zero", 0.0}});
  }
  const std::string name = std::filesystem::path(path).filename();
  EXPECT_TRUE(std::regex_match(name, std::regex(R"(events\.out\.tfevents\.\d{10}\.)" + std::string(host))))
      << name;
  EXPECT_TRUE(is_event_file_name(name));
  const std::vector<std::string> events = read_records(path);
  ASSERT_EQ(events.size(), 3u);
  // Event{wall_time (1, fixed64), file_version (3, length-delimited) = "brain.Event:2"}.
  ASSERT_EQ(events[0].size(), 9u + 15u);
  EXPECT_EQ(events[0][0], '\x09');
  EXPECT_EQ(events[0].substr(9), "\x1a\x0d" "brain.Event:2");
  // Event{wall_time, step (2, varint) = 7, session_log (7, length-delimited) = {status (1) = START (1)}}.
  EXPECT_EQ(events[1].substr(9), bytes_of({0x10, 0x07, 0x3a, 0x02, 0x08, 0x01}));
  // Event{wall_time = 1.5, step = 7, summary (5) = {value (1) = {tag (1), simple_value (2, fixed32)}, ...}};
  // 0.0 is written too: a value TensorBoard does not see would be a hole in the chart.
  const std::string loss = bytes_of({0x0a, 0x11, 0x0a, 0x0a}) + "train/loss" + bytes_of({0x15, 0, 0, 0, 0x40});
  const std::string zero = bytes_of({0x0a, 0x11, 0x0a, 0x0a}) + "train/zero" + bytes_of({0x15, 0, 0, 0, 0});
  EXPECT_EQ(events[2], bytes_of({0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x10, 0x07, 0x2a, 0x26}) + loss + zero);
}

TEST_F(EventFileTest, NeverWritesIntoAnExistingFileAndNewStartsRemoveThem) {
  std::vector<std::string> paths;
  for (int i = 0; i < 3; ++i) paths.push_back(EventFile(dir_, 1).path());  // within a second, usually
  std::sort(paths.begin(), paths.end());
  EXPECT_EQ(std::unique(paths.begin(), paths.end()), paths.end()) << "two event files share a name";
  for (const std::string& p : paths) EXPECT_EQ(read_records(p).size(), 2u) << p;
  std::ofstream(dir_ + "/metrics.jsonl") << "{}\n";
  remove_event_files(dir_);
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) left.push_back(entry.path().filename());
  EXPECT_EQ(left, std::vector<std::string>{"metrics.jsonl"});
  EXPECT_NO_THROW(remove_event_files(dir_ + "/absent"));
}

TEST_F(EventFileTest, MissingDirectoryIsAUserErrorNamingTheFile) {
  try {
    EventFile file(dir_ + "/absent", 1);
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(dir_ + "/absent/events.out.tfevents."), std::string::npos) << e.what();
  }
}

// Debian's libsentencepiece0 carries its own protobuf and ours is kept apart from it
// (core/tensorboard/CMakeLists.txt); were either to bind to the other's copy, training or
// loading a model (its protobuf) or writing events (ours) would crash or fail here.
TEST_F(EventFileTest, LivesBesideSentencepiecesOwnProtobuf) {
  const char* syllables[] = {"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "xi"};
  std::ofstream corpus(dir_ + "/corpus.txt");
  for (int line = 0; line < 600; ++line) {
    for (int w = 0; w < 8; ++w)
      corpus << syllables[(line * 7 + w) % 12] << syllables[(line + w * 5) % 12] << syllables[(line * w + 3) % 12] << ' ';
    corpus << "\n\n";
  }
  corpus.close();
  EventFile before(dir_, 1);
  TokenizerTrainOptions options;
  options.inputs = {dir_ + "/corpus.txt"};
  options.output = dir_ + "/tok.model";
  options.vocab_size = 300;
  train_tokenizer(options);
  const auto tokenizer = open_tokenizer(options.output);
  EXPECT_EQ(tokenizer->identity(), "sentencepiece");
  EXPECT_EQ(tokenizer->decode(tokenizer->encode("kalomi nerusa")), "kalomi nerusa");
  before.write_scalars(1, 1.0, {{"train/loss", 3.0}});
  EventFile after(dir_, 2);
  after.write_scalars(2, 2.0, {{"train/loss", 2.5}});
  EXPECT_EQ(read_records(before.path()).size(), 3u);
  EXPECT_EQ(read_records(after.path()).size(), 3u);
}

// The same on the shipped binary, by its dynamic symbol table: it neither exports a protobuf
// symbol (which sentencepiece would bind to) nor imports one (which would come from
// sentencepiece's copy).
TEST(ProtobufIsolation, TheBinaryNeitherExportsNorImportsProtobufSymbols) {
  const std::string command = std::string("nm -D ") + USTRAIN_BINARY + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), &pclose);
  ASSERT_TRUE(pipe) << command;
  std::string symbols;
  for (char buffer[4096]; std::fgets(buffer, sizeof buffer, pipe.get());) symbols += buffer;
  ASSERT_NE(symbols.find(" U "), std::string::npos) << "nm listed no symbols:\n" << symbols;
  std::istringstream lines(symbols);
  for (std::string line; std::getline(lines, line);)
    EXPECT_EQ(line.find("google8protobuf"), std::string::npos) << line;
}

}  // namespace
}  // namespace ustrain
