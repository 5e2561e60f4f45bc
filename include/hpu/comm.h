/* libhpu — collectives between devices: communicators, reductions, point to point.
 *
 * Shaped like NCCL/HCCL. A communicator is one rank of a group of `nranks`
 * ranks; each rank is bound to one open device and works on that device's
 * memory. Every collective is a stream operation: the call checks its
 * arguments, queues the work on `stream` (NULL: the default stream of the
 * communicator's device) and returns; the result is ready when the stream has
 * run it (hpuStreamSynchronize). All ranks must call the same collectives in the
 * same order with matching arguments; a mismatch is detected from the first
 * frame of each operation (sequence, collective, data type, count, root) and
 * fails the operation on every rank with HPU_ERROR_INVALID_USAGE naming the
 * ranks.
 *
 * Faults: every wait of an operation has a deadline (HPU_COMM_TIMEOUT, default
 * 30 s, or hpuCommSetTimeout). A timeout, a failed or aborted peer, or a
 * mismatch makes the communicator's error sticky: the failing operation becomes
 * its stream's sticky error, hpuCommGetAsyncError reports it, and later calls on
 * the communicator fail with it until hpuCommDestroy. hpuCommAbort works from any
 * thread, never blocks on a peer and wakes every waiter with HPU_ERROR_ABORTED.
 *
 * Results are deterministic: the same inputs give bitwise-identical outputs on
 * every rank and in every run, whatever order the ranks arrive in. */
#ifndef HPU_COMM_H
#define HPU_COMM_H

#include <hpu/device.h>

/* The rendezvous token of a group: made once by hpuGetUniqueId, handed to every
 * rank (by any means: memory, a file, MPI_Bcast) and passed by pointer to
 * hpuCommInitRank. It carries a random secret; treat it as opaque bytes. */
#define HPU_UNIQUE_ID_BYTES 128
typedef struct hpuUniqueId {
  char internal[HPU_UNIQUE_ID_BYTES];
} hpuUniqueId_t;

typedef struct hpuComm_st *hpuComm_t;

/* Reduction operations. Numbers are fixed forever.
 * Floating types: sum, product, minimum, maximum (a NaN operand gives NaN) and
 * average (the sum divided by the rank count). bf16 and f16 are widened to f32
 * for every combining step and rounded to nearest even after it.
 * Integer types: sum and product wrap around (two's complement); average is the
 * wrapped sum divided by the rank count, rounded toward zero.
 * HPU_BOOL: sum and max are logical OR, prod and min logical AND; avg is
 * HPU_ERROR_UNSUPPORTED. */
typedef enum hpuRedOp {
  HPU_SUM = 0,
  HPU_PROD = 1,
  HPU_MIN = 2,
  HPU_MAX = 3,
  HPU_AVG = 4
} hpuRedOp_t;

#define HPU_NUM_RED_OPS 5

HPU_EXTERN_C_BEGIN

/* ---- communicators -------------------------------------------------------- */

/* Makes a new unique id with a fresh random secret (16 bytes from getrandom)
 * and starts its rendezvous listener in this process (on HPU_SOCKET_IFNAME's
 * interface). Whoever holds the id's bytes can join the group. The listener
 * stops when the group's ranks have left, when a rank leaves before all have
 * joined, at exit, or HPU_COMM_TIMEOUT after this call or the last join with
 * ranks still missing. */
HPU_API hpuStatus_t hpuGetUniqueId(hpuUniqueId_t *id);

/* Joins rank `rank` (0..nranks-1) of the group named by `id`, bound to the open
 * device `dev`. Blocks until all `nranks` ranks have joined (each from its own
 * thread) or the deadline (HPU_COMM_TIMEOUT) passes. The device must stay open
 * while the communicator lives. */
HPU_API hpuStatus_t hpuCommInitRank(hpuComm_t *comm, hpuDevice_t dev, int nranks, const hpuUniqueId_t *id,
                                    int rank);

/* Makes a whole group in one call: comms[i] is rank i, bound to devs[i], for
 * i in 0..ndev-1. The devices must be distinct and open. */
HPU_API hpuStatus_t hpuCommInitAll(hpuComm_t *comms, int ndev, const hpuDevice_t *devs);

/* Waits for the communicator's queued operations, then releases it. NULL is
 * accepted. After an error or abort it releases without waiting for peers. */
HPU_API hpuStatus_t hpuCommDestroy(hpuComm_t comm);

/* Fails the communicator's pending and future operations with
 * HPU_ERROR_ABORTED, waking every waiter; peers waiting on this rank fail with
 * HPU_ERROR_REMOTE. Safe from any thread; never blocks on a peer. The handle
 * stays valid until hpuCommDestroy. */
HPU_API hpuStatus_t hpuCommAbort(hpuComm_t comm);

/* The communicator's sticky error (HPU_SUCCESS if none) in *error; the message
 * of that error becomes this thread's last error message. Never blocks. */
HPU_API hpuStatus_t hpuCommGetAsyncError(hpuComm_t comm, hpuStatus_t *error);

/* Number of ranks in the group. */
HPU_API hpuStatus_t hpuCommCount(hpuComm_t comm, int *count);

/* This communicator's rank. */
HPU_API hpuStatus_t hpuCommUserRank(hpuComm_t comm, int *rank);

/* Per-communicator deadline in seconds for each wait of operations that start
 * after the call (> 0, at most one week); 0 restores HPU_COMM_TIMEOUT. */
HPU_API hpuStatus_t hpuCommSetTimeout(hpuComm_t comm, double seconds);
HPU_API hpuStatus_t hpuCommGetTimeout(hpuComm_t comm, double *seconds);

/* ---- collectives ------------------------------------------------------------
 * Buffers lie inside one live allocation each, of the communicator's device
 * (NULL allowed when the count is 0; else HPU_ERROR_INVALID_HANDLE, or
 * HPU_ERROR_INVALID_ARGUMENT for a buffer that runs past its allocation's
 * end). Counts are in elements of `dtype`. In place when the send
 * buffer is the receive buffer (Allgather: send == recv + rank * sendcount;
 * ReduceScatter: recv == send + rank * recvcount). Other overlaps are invalid. */

/* recv[i] = op over all ranks of send[i], on every rank. */
HPU_API hpuStatus_t hpuAllreduce(hpuStream_t stream, hpuComm_t comm, const void *send, void *recv, size_t count,
                                 hpuDataType_t dtype, hpuRedOp_t op);

/* recv = root's send on every rank (send is read on the root only). */
HPU_API hpuStatus_t hpuBroadcast(hpuStream_t stream, hpuComm_t comm, const void *send, void *recv, size_t count,
                                 hpuDataType_t dtype, int root);

/* recv on the root = op over all ranks of send (recv is used on the root only). */
HPU_API hpuStatus_t hpuReduce(hpuStream_t stream, hpuComm_t comm, const void *send, void *recv, size_t count,
                              hpuDataType_t dtype, hpuRedOp_t op, int root);

/* recv[r * sendcount + i] = send[i] of rank r. */
HPU_API hpuStatus_t hpuAllgather(hpuStream_t stream, hpuComm_t comm, const void *send, void *recv, size_t sendcount,
                                 hpuDataType_t dtype);

/* recv[i] = op over all ranks of send[rank * recvcount + i]. */
HPU_API hpuStatus_t hpuReduceScatter(hpuStream_t stream, hpuComm_t comm, const void *send, void *recv, size_t recvcount,
                                     hpuDataType_t dtype, hpuRedOp_t op);

/* recv[r * count + i] = send[rank * count + i] of rank r. */
HPU_API hpuStatus_t hpuAlltoall(hpuStream_t stream, hpuComm_t comm, const void *send, void *recv, size_t count,
                                hpuDataType_t dtype);

/* Completes on every rank once all ranks have reached it. */
HPU_API hpuStatus_t hpuBarrier(hpuStream_t stream, hpuComm_t comm);

/* ---- point to point ----------------------------------------------------------
 * A send completes when the peer's matching receive has taken the data, so a
 * pair of ranks that send to each other must issue the sends and receives
 * inside one hpuGroupStart/hpuGroupEnd. Sends and receives between one pair are
 * matched in call order; counts and data types must agree. */
HPU_API hpuStatus_t hpuSend(hpuStream_t stream, hpuComm_t comm, const void *send, size_t count, hpuDataType_t dtype,
                            int peer);
HPU_API hpuStatus_t hpuRecv(hpuStream_t stream, hpuComm_t comm, void *recv, size_t count, hpuDataType_t dtype,
                            int peer);

/* Groups: between hpuGroupStart and the matching hpuGroupEnd (they nest; per
 * thread) collective and point-to-point calls are checked and recorded; the
 * outermost hpuGroupEnd issues them, the sends and receives of one
 * communicator and stream as one operation that progresses them all at once. */
HPU_API hpuStatus_t hpuGroupStart(void);
HPU_API hpuStatus_t hpuGroupEnd(void);

/* ---- launch environments ------------------------------------------------------
 * One communicator per listed device of this process, for a job started by a
 * launcher: the process with launch rank p hosts ranks p * ndev + i (bound to
 * devs[i]) of a group of (process count) * ndev ranks. The process rank and
 * count come from HPU_RANK/HPU_WORLD_SIZE/HPU_LOCAL_RANK, else torchrun or
 * Lightning (RANK or NODE_RANK, WORLD_SIZE, LOCAL_RANK; WORLD_SIZE and
 * LOCAL_WORLD_SIZE count ranks, as there, so the process count is WORLD_SIZE /
 * ndev), Open MPI (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK) or Slurm
 * (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID); the rendezvous from HPU_COMM_ID=host:port, else MASTER_ADDR
 * and MASTER_PORT, where the process of rank 0 listens. Processes may start in
 * any order within the deadline (HPU_COMM_TIMEOUT). Connections prove they
 * know the secret: HPU_COMM_SECRET, else the user's file
 * $XDG_CONFIG_HOME/hpu/secret or ~/.config/hpu/secret (made 0600 with random
 * content on first use; refused if others can read it). Rank 0 listens at the
 * rendezvous address (loopback when the launcher says all processes are on
 * this host), on every interface only with HPU_COMM_LISTEN=any. Without any
 * launcher variable it behaves as hpuCommInitAll. */
HPU_API hpuStatus_t hpuCommInitFromEnv(hpuComm_t *comms, int ndev, const hpuDevice_t *devs);

HPU_EXTERN_C_END

#endif /* HPU_COMM_H */
