#include "core/distributed/muon_tensor_parallel.h"

#include <vector>

namespace ustrain {

Tensor float_range(const Tensor& t, std::int64_t begin, std::int64_t n) {
  char* data = t.data ? static_cast<char*>(t.data) + begin * static_cast<std::int64_t>(sizeof(float)) : nullptr;
  return Tensor(data, Shape{n}, DType::f32, t.device);
}

namespace {

// Between the stacked column blocks (block r: rows x w at r * rows * w) and the matrix
// (rows, parts * w), row by row.
void interleave(Backend& backend, const MuonMatrix& m, int parts, const Tensor& stacked, const Tensor& whole,
                bool to_matrix) {
  const std::int64_t w = m.box_cols;
  for (int r = 0; r < parts; ++r)
    for (std::int64_t row = 0; row < m.rows; ++row) {
      const Tensor in_matrix = float_range(whole, row * m.cols + r * w, w);
      const Tensor in_block = float_range(stacked, r * m.box_numel() + row * w, w);
      if (to_matrix) backend.copy(in_matrix, in_block);
      else backend.copy(in_block, in_matrix);
    }
}

}  // namespace

void move_boxes(Communicator& tp, Backend& backend, const MuonMatrix& m, const Tensor& box, const Tensor& whole,
                const Tensor& staging, bool to_owner) {
  const std::int64_t n = m.box_numel();
  const auto take = to_owner ? PeerTransfer::Kind::recv : PeerTransfer::Kind::send;
  std::vector<PeerTransfer> transfers;
  if (tp.rank() != m.tp_owner) {
    transfers.push_back({to_owner ? PeerTransfer::Kind::send : PeerTransfer::Kind::recv, float_range(box, 0, n),
                         m.tp_owner, 0});
  } else {
    const bool blocks = m.layout == TpLayout::row_parallel;  // column blocks: staged
    const Tensor stacked = blocks ? staging : whole;         // box r at r * n
    if (!to_owner && blocks) interleave(backend, m, tp.size(), stacked, whole, /*to_matrix=*/false);
    for (int r = 0; r < tp.size(); ++r) {
      const Tensor part = float_range(stacked, r * n, n);
      if (r != tp.rank()) transfers.push_back({take, part, r, 0});
      else if (to_owner) backend.copy(part, float_range(box, 0, n));
      else backend.copy(float_range(box, 0, n), part);
    }
  }
  backend.synchronize();  // what leaves is written
  std::vector<Work> works = tp.exchange(transfers);
  wait_all(works);
  if (to_owner && tp.rank() == m.tp_owner && m.layout == TpLayout::row_parallel)
    interleave(backend, m, tp.size(), staging, whole, /*to_matrix=*/true);
}

}  // namespace ustrain
