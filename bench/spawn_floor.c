/* The floor under fire_lateness.sh: how soon after T can N processes have started on
 * this machine when nothing else happens — no claim, no lock store, no pipes, no
 * logs, no other replicas. At every second boundary T, THREADS threads (one per core
 * by default) start N processes of the given stamp between them, with the cheapest
 * start Linux has (vfork + execve, an empty fd table apart from stdio), and reap them.
 * Each stamp appends (its own start − T) to OUT, exactly as under tickd, so
 * fire_lateness.sh's figures and these can be laid side by side.
 *
 *   spawn_floor STAMP OUT [N=100] [SECONDS=20] [THREADS=2]
 *
 * THREADS=100 starts each process from a thread of its own, as tickd's run threads do.
 *
 * Whatever tickd does on top of this is tickd's cost; what is here is the kernel's. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char* stamp;
static const char* out;
static int jobs_n = 100;
static int threads_n = 2;

struct Slice {
  int first, count;
  long tick;
  pthread_barrier_t* start;
};

static void SpawnSlice(const struct Slice* s) {
  char tick_env[64];
  snprintf(tick_env, sizeof tick_env, "TICKD_TICK_UNIX=%ld", s->tick);
  pid_t pids[s->count];
  for (int i = 0; i < s->count; ++i) {
    char job_env[64];
    snprintf(job_env, sizeof job_env, "TICKD_JOB=job-%d", s->first + i);
    char* const argv[] = {(char*)stamp, (char*)out, NULL};
    char* const envp[] = {job_env, "TICKD_NODE=floor", tick_env, NULL};
    pids[i] = vfork();
    if (pids[i] == 0) {
      execve(stamp, argv, envp);
      _exit(127);
    }
  }
  for (int i = 0; i < s->count; ++i) waitpid(pids[i], NULL, 0);
}

static void* Worker(void* arg) {
  struct Slice* s = arg;
  pthread_barrier_wait(s->start);
  SpawnSlice(s);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: spawn_floor STAMP OUT [N] [SECONDS] [THREADS]\n");
    return 2;
  }
  stamp = argv[1];
  out = argv[2];
  if (argc > 3) jobs_n = atoi(argv[3]);
  const int seconds = argc > 4 ? atoi(argv[4]) : 20;
  if (argc > 5) threads_n = atoi(argv[5]);
  if (jobs_n < 1 || seconds < 1 || threads_n < 1 || threads_n > 128) {
    fprintf(stderr, "spawn_floor: N, SECONDS and THREADS must be positive (THREADS <= 128)\n");
    return 2;
  }

  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  for (long tick = now.tv_sec + 1; tick <= now.tv_sec + seconds; ++tick) {
    /* The threads are made before T and wait at a barrier, so T finds them ready,
     * as tickd's pool threads are. */
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads_n + 1);
    pthread_t threads[128];
    struct Slice slices[128];
    for (int t = 0; t < threads_n; ++t) {
      const int first = jobs_n * t / threads_n, end = jobs_n * (t + 1) / threads_n;
      slices[t] = (struct Slice){first + 1, end - first, tick, &start};
      pthread_create(&threads[t], NULL, Worker, &slices[t]);
    }
    const struct timespec at = {tick, 0};
    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, NULL) != 0) {
    }
    pthread_barrier_wait(&start);
    for (int t = 0; t < threads_n; ++t) pthread_join(threads[t], NULL);
    pthread_barrier_destroy(&start);
  }
  return 0;
}
