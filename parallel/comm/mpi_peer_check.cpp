#include "parallel/comm/mpi_peer_check.h"

#include <algorithm>
#include <cstring>

namespace ustrain::mpi_detail {
namespace {

enum Kind : std::int32_t { kQuestion = 1, kAnswer = 2, kDeparture = 3 };
constexpr int kTag = 7;

}  // namespace

// One record on the wire, the same size whatever its kind.
struct PeerCheck::Message {
  std::int32_t kind = 0;
  std::int32_t started = 0;  // answer: 1 started, 0 not, -1 no such group
  std::int32_t channel_kind = 0;  // question: the channel asked about (its peer is the asker)
  std::int32_t channel_tag = 0;
  std::uint64_t group_key = 0;
  std::int64_t op_index = 0;
  std::int64_t inquiry = 0;  // the question's id, echoed by the answer
  char text[448] = {};       // answer: the activity; departure: the reason

  void set_text(const std::string& s) {
    const std::size_t n = std::min(s.size(), sizeof text - 1);
    std::memcpy(text, s.data(), n);
    text[n] = '\0';
  }
  std::string get_text() const { return std::string(text, strnlen(text, sizeof text)); }
};

struct PeerCheck::Outgoing {
  Message message;
  MPI_Request request = MPI_REQUEST_NULL;
};

PeerCheck::PeerCheck() : incoming_(std::make_unique<Message>()) {
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  post_receive();
}

PeerCheck::~PeerCheck() = default;

void PeerCheck::post_receive() {
  if (MPI_Irecv(incoming_.get(), sizeof(Message), MPI_BYTE, MPI_ANY_SOURCE, kTag, comm_, &receive_) != MPI_SUCCESS)
    receive_ = MPI_REQUEST_NULL;
}

void PeerCheck::send(const Message& m, int to) {
  Outgoing& out = outgoing_.emplace_back();
  out.message = m;
  if (MPI_Isend(&out.message, sizeof(Message), MPI_BYTE, to, kTag, comm_, &out.request) != MPI_SUCCESS)
    outgoing_.pop_back();  // a peer that cannot be reached simply does not hear from us
}

void PeerCheck::poll(const LocalView& view) {
  while (receive_ != MPI_REQUEST_NULL) {
    int done = 0;
    MPI_Status status;
    if (MPI_Test(&receive_, &done, &status) != MPI_SUCCESS) {
      receive_ = MPI_REQUEST_NULL;  // the channel broke: stop listening
      break;
    }
    if (!done) break;
    const Message m = *incoming_;
    post_receive();
    handle(m, status.MPI_SOURCE, view);
  }
  for (auto it = outgoing_.begin(); it != outgoing_.end();) {
    int done = 0;
    if (MPI_Test(&it->request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) {
      it = outgoing_.erase(it);
    } else {
      ++it;
    }
  }
}

void PeerCheck::handle(const Message& m, int from, const LocalView& view) {
  if (m.kind == kQuestion) {
    Message answer;
    answer.kind = kAnswer;
    answer.group_key = m.group_key;
    answer.op_index = m.op_index;
    answer.inquiry = m.inquiry;
    const auto kind = static_cast<Channel::Kind>(m.channel_kind);
    const Channel channel{kind, kind == Channel::collective ? -1 : from, m.channel_tag};
    const std::optional<bool> started = view.started(m.group_key, channel, m.op_index);
    answer.started = !started ? -1 : *started ? 1 : 0;
    answer.set_text(view.activity());
    send(answer, from);
  } else if (m.kind == kAnswer) {
    const auto it = inquiries_.find(m.inquiry);
    if (it == inquiries_.end()) return;  // too late: the inquiry has been judged
    PeerAnswer& a = it->second.answers[from];
    a.rank = from;
    a.answered = true;
    a.started = m.started == 1;
    a.activity = m.get_text();
    if (m.started == -1) a.activity = "it has not created this group; " + a.activity;
  } else if (m.kind == kDeparture) {
    departures_.push_back({from, m.get_text(), Clock::now()});
  }
}

std::int64_t PeerCheck::ask(std::uint64_t key, const Channel& channel, std::int64_t index,
                            const std::vector<int>& members, Clock::time_point until) {
  const std::int64_t id = next_inquiry_++;
  inquiries_[id] = Inquiry{members, {}, until};
  Message question;
  question.kind = kQuestion;
  question.group_key = key;
  question.channel_kind = channel.kind;
  question.channel_tag = channel.tag;
  question.op_index = index;
  question.inquiry = id;
  for (int member : members) send(question, member);
  return id;
}

std::optional<std::vector<PeerAnswer>> PeerCheck::answers(std::int64_t inquiry, Clock::time_point now) {
  const auto it = inquiries_.find(inquiry);
  if (it == inquiries_.end()) return std::vector<PeerAnswer>{};
  Inquiry& q = it->second;
  if (q.answers.size() < q.members.size() && now < q.until) return std::nullopt;
  std::vector<PeerAnswer> result;
  for (int member : q.members) {
    const auto a = q.answers.find(member);
    result.push_back(a != q.answers.end() ? a->second : PeerAnswer{member, false, false, {}});
  }
  inquiries_.erase(it);
  return result;
}

void PeerCheck::announce_departure(const std::string& reason) {
  if (announced_) return;
  announced_ = true;
  Message notice;
  notice.kind = kDeparture;
  notice.set_text(reason);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) send(notice, r);
}

void PeerCheck::close() {
  if (receive_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&receive_);
    MPI_Wait(&receive_, MPI_STATUS_IGNORE);
  }
  for (Outgoing& out : outgoing_) MPI_Wait(&out.request, MPI_STATUS_IGNORE);
  outgoing_.clear();
  MPI_Comm_free(&comm_);
}

}  // namespace ustrain::mpi_detail
