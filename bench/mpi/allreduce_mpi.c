/* The peer of `hpu-bench allreduce-proc`: Open MPI's MPI_Allreduce on the same
 * sizes, f32 sum, run under mpirun by hpu-bench. Prints, from rank 0, one line
 * per size: "<bytes> <microseconds per allreduce>".
 * Usage: hpu-bench-mpi MIN_BYTES MAX_BYTES FACTOR ITERS WARMUP (ITERS 0: by size;
 * WARMUP -1: as many as timed) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  size_t min = argc > 1 ? strtoull(argv[1], NULL, 10) : 4096;
  size_t max = argc > 2 ? strtoull(argv[2], NULL, 10) : 1 << 24;
  double factor = argc > 3 ? atof(argv[3]) : 4;
  int iters = argc > 4 ? atoi(argv[4]) : 0, warmup = argc > 5 ? atoi(argv[5]) : 3;
  int rank, size, i;
  size_t bytes, count, k;
  float *send, *recv;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  send = malloc(max);
  recv = malloc(max);
  for (k = 0; k < max / sizeof(float); ++k) send[k] = (float)(k % 7);
  for (bytes = min; bytes <= max; bytes = (size_t)((double)bytes * factor)) {
    int n = iters > 0 ? iters : (int)((256u << 20) / bytes);
    double t0, t;
    if (n < 5) n = 5;
    if (n > 1000) n = 1000;
    count = bytes / sizeof(float);
    for (i = 0; i < (warmup < 0 ? n : warmup); ++i) MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (i = 0; i < n; ++i) MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    t = (MPI_Wtime() - t0) / n;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("%zu %.3f\n", bytes, t * 1e6);
    fflush(stdout);
    if (factor <= 1) break;
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
