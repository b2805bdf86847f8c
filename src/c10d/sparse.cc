// [Sparse] allreduce of a sparse COO tensor, as gloo does it: each rank's nnz first (one small
// all_gather, waited for here), then every rank's indices and values with all_gather_v, summed
// by coalescing them into one tensor that is written into the input once both arrived.
// Indices travel transposed ([nnz, sparse_dim], contiguous), so that the ranks' blocks laid end
// to end are already the gathered [total, sparse_dim]; values are [nnz, dense dims...].
#include <ATen/ATen.h>

#include "c10d/process_group.h"
#include "c10d/tensors.h"
#include "lockstep/core/error.h"
#include "lockstep/group/process_group.h"

namespace lockstep::c10d_backend {

auto ProcessGroupLockstep::sparse_allreduce(const at::Tensor& tensor,
                                            const ::c10d::AllreduceOptions& opts) -> Ptr<Work> {
  const char* name = "allreduce (sparse)";
  ReduceOp op = reduce_op(opts.reduceOp, name);
  if (op != ReduceOp::sum && op != ReduceOp::avg)
    throw InvalidArgument(detail::concat("lockstep ", name,
                                         ": only SUM and AVG are defined for "
                                         "sparse tensors, not ",
                                         reduce_op_name(op)));
  if (tensor.layout() != at::kSparse)
    throw InvalidArgument(detail::concat("lockstep ", name,
                                         ": only COO tensors are supported, "
                                         "not ",
                                         tensor.layout(), "; call .to_sparse() first"));
  auto timeout = timeout_of(opts.timeout);
  at::Tensor input = tensor.coalesce();
  at::Tensor indices = input._indices().t().contiguous();  // [nnz, sparse_dim]
  at::Tensor values = input._values().contiguous();        // [nnz, dense...]
  int64_t row = 1;
  for (int64_t d = 1; d < values.dim(); ++d) row *= values.size(d);

  at::Tensor mine = at::full({1}, input._nnz(), at::kLong);
  at::Tensor nnz = at::empty({size_}, at::kLong);
  group().all_gather(view_of(mine, name), view_of(nnz, name), {.timeout = timeout})->wait();
  std::vector<size_t> index_counts, value_counts;
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    int64_t n = nnz[r].item<int64_t>();
    index_counts.push_back(static_cast<size_t>(n * indices.size(1)));
    value_counts.push_back(static_cast<size_t>(n * row));
    total += n;
  }
  std::vector<int64_t> value_shape = values.sizes().vec();
  value_shape[0] = total;
  at::Tensor all_indices = at::empty({total, indices.size(1)}, indices.options());
  at::Tensor all_values = at::empty(value_shape, values.options());
  auto index_op = group().all_gather_v(view_of(indices, name), view_of(all_indices, name),
                                       index_counts, {.timeout = timeout});
  auto value_op = group().all_gather_v(view_of(values, name), view_of(all_values, name),
                                       value_counts, {.timeout = timeout});
  int size = size_;
  auto finish = [tensor, all_indices, all_values, op, size] {
    at::Tensor sum = at::sparse_coo_tensor(all_indices.t(), all_values, tensor.sizes()).coalesce();
    if (op == ReduceOp::avg) sum = sum / size;
    tensor.copy_(sum);
  };
  return issue({.type = ::c10d::OpType::ALLREDUCE,
                .outputs = {tensor},
                .keep_alive = {indices, values, all_indices, all_values},
                .finish = finish},
               {index_op, value_op});
}

}  // namespace lockstep::c10d_backend
