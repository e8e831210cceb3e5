// A model of the fallback's hot read pipeline in plain C and CUDA, to find where the time
// goes (docs/BENCHMARKS.md). Build on the GPU machine:
//   gcc -O2 -o pipebench pipebench.c -I$CUDA/include $CUDA/lib64/libcudart.so -lpthread
// Run: pipebench FILE MODE THREADS CHUNK_KIB BUFFERS ODIRECT REQUEST_MIB FIRST_KIB WILLNEED SPIN
//   MODE pread: threads pread only; pipe: each thread preads chunk i+1 while chunk i is
//   copied on its own stream (static split per request); dyn: chunks claimed dynamically;
//   mix: pread threads beside one thread doing pinned copies. REQUEST_MIB 0 is one
//   continuous pipeline over the file; N splits it into N-MiB requests with a barrier after
//   each (one synchronous caller). FIRST_KIB > 0 ramps chunk sizes up from it. With
//   REQUEST_MIB > 0 it prints a per-request timeline.
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static const char *path; static size_t F0; static int WN; static long long size; static int T, B, odirect, pinned = 1;
static size_t C; static long long R; static char *mode;
static char *dev; static int fd_buf, fd_dir;
static pthread_barrier_t pbar; static int SPIN;
static volatile int bcount, bgen; static int NB;
static void bar_wait(void){ if(!SPIN){pthread_barrier_wait(&pbar);return;}
  int g=__atomic_load_n(&bgen,__ATOMIC_ACQUIRE);
  if(__atomic_add_fetch(&bcount,1,__ATOMIC_ACQ_REL)==NB){ __atomic_store_n(&bcount,0,__ATOMIC_RELAXED); __atomic_store_n(&bgen,g+1,__ATOMIC_RELEASE);}
  else while(__atomic_load_n(&bgen,__ATOMIC_ACQUIRE)==g) __builtin_ia32_pause(); }
static double tp[256], te[256], ts[256], tb[256];
#define MAXR 1024
static double Rstart[MAXR], Rissue[256][MAXR], Rpread[256][MAXR], Rsync[256][MAXR], Rg0[256][MAXR], Rg1[256][MAXR];
static cudaEvent_t gref; static double cref; static int cur_r;
static cudaEvent_t evF[256], evL[256];
static volatile int stop_mix;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define CK(x) do{cudaError_t e=(x); if(e){fprintf(stderr,"%s: %s\n",#x,cudaGetErrorString(e));exit(1);}}while(0)

static void readfull(int fd, char *b, size_t n, long long off){
  size_t d=0; while(d<n){ssize_t r=pread(fd,b+d,n-d,off+d); if(r<=0){perror("pread");exit(1);} d+=r;}
}
typedef struct{int id;} arg_t;
static long long nextc[MAXR];
static void dyn_request(int id, cudaStream_t s, cudaEvent_t *ev, char **buf, int *pend, long long r, int fd, int rq){
  long long end = r+R < size ? r+R : size; long long nch = (end-r+C-1)/C; int cnt=0;
  for(;;){ long long c=__atomic_fetch_add(&nextc[rq],1,__ATOMIC_RELAXED); if(c>=nch) break;
    long long at=r+c*C; size_t n = end-at < (long long)C ? (size_t)(end-at) : C; int k=cnt%B;
    double a0=now(); if(pend[k]){CK(cudaEventSynchronize(ev[k])); pend[k]=0;}
    double a1=now(); readfull(fd, buf[k], n, at); te[id]+=a1-a0; tp[id]+=now()-a1;
    if(cnt==0) Rissue[id][rq]=now();
    CK(cudaMemcpyAsync(dev+at, buf[k], n, cudaMemcpyHostToDevice, s)); CK(cudaEventRecord(ev[k], s)); pend[k]=1;
    if(cnt==0) CK(cudaEventRecord(evF[id], s));
    cnt++; }
  if(cnt){ Rpread[id][rq]=now(); CK(cudaEventRecord(evL[id], s)); }
  double a0=now(); CK(cudaStreamSynchronize(s)); double a1=now(); ts[id]+=a1-a0; memset(pend,0,16*sizeof(int));
  if(cnt){ float f0,f1; Rsync[id][rq]=a1; CK(cudaEventElapsedTime(&f0,gref,evF[id])); CK(cudaEventElapsedTime(&f1,gref,evL[id])); Rg0[id][rq]=cref+f0*1e-3; Rg1[id][rq]=cref+f1*1e-3; }
  else { Rissue[id][rq]=1e18; Rpread[id][rq]=0; Rg0[id][rq]=1e18; Rg1[id][rq]=0; Rsync[id][rq]=0; }
  bar_wait(); tb[id]+=now()-a1;
}
static void piece(int id, cudaStream_t s, cudaEvent_t *ev, char **buf, int *pend, long long from, long long to, int fd){
  int i=0;
  if(WN) posix_fadvise(fd_buf, from, to-from, POSIX_FADV_WILLNEED);
  for(long long at=from; at<to; i++){
    int k=i%B; size_t c = C; if(F0 && i<20 && (F0<<i) < C) c = F0<<i;
    size_t n = (to-at)<(long long)c ? (size_t)(to-at) : c;
    double a0=now(); if(pend[k]){CK(cudaEventSynchronize(ev[k])); pend[k]=0;}
    double a1=now(); readfull(fd, buf[k], n, at); te[id]+=a1-a0; tp[id]+=now()-a1;
    if(strcmp(mode,"pread")){ if(i==0 && R && from/R<MAXR) Rissue[id][from/R]=now(); CK(cudaMemcpyAsync(dev+at, buf[k], n, cudaMemcpyHostToDevice, s)); CK(cudaEventRecord(ev[k], s)); pend[k]=1;
      if(R && i==0) CK(cudaEventRecord(evF[id], s)); }
    at += n;
  }
  if(R && from/R<MAXR){ Rpread[id][from/R]=now(); }
  if(R){ CK(cudaEventRecord(evL[id], s)); }
}
static void *worker(void *p){
  int id=((arg_t*)p)->id; CK(cudaSetDevice(0));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t ev[16]; char *buf[16]; int pend[16]={0};
  for(int k=0;k<B;k++){ CK(cudaEventCreateWithFlags(&ev[k], cudaEventDisableTiming));
    if(pinned) CK(cudaHostAlloc((void**)&buf[k], C, 0)); else { buf[k]=aligned_alloc(4096,C); memset(buf[k],0,C);} }
  CK(cudaEventCreate(&evF[id])); CK(cudaEventCreate(&evL[id]));
  int fd = odirect? fd_dir: fd_buf;
  bar_wait();
  if(R==0){ long long per=(size/T); long long from=id*per, to= id==T-1? size: from+per; piece(id,s,ev,buf,pend,from,to,fd); CK(cudaStreamSynchronize(s)); }
  else if(!strcmp(mode,"dyn")){ for(long long r=0;r<size;r+=R) dyn_request(id,s,ev,buf,pend,r,fd,(int)(r/R)); }
  else { for(long long r=0;r<size;r+=R){ long long per=R/T; long long from=r+id*per, to= id==T-1? r+R : from+per; if(to>size) to=size; if(from<to) piece(id,s,ev,buf,pend,from,to,fd); double a0=now(); CK(cudaStreamSynchronize(s)); double a1=now(); int rr=(int)(r/R); if(rr<MAXR){ Rsync[id][rr]=a1; float f0,f1; CK(cudaEventElapsedTime(&f0,gref,evF[id])); CK(cudaEventElapsedTime(&f1,gref,evL[id])); Rg0[id][rr]=cref+f0*1e-3; Rg1[id][rr]=cref+f1*1e-3; } memset(pend,0,sizeof pend); bar_wait(); ts[id]+=a1-a0; tb[id]+=now()-a1;} }
  bar_wait();
  return 0;
}
static void *mixcopy(void *p){ (void)p; CK(cudaSetDevice(0)); char *h; CK(cudaHostAlloc((void**)&h, 64<<20, 0)); cudaStream_t s; CK(cudaStreamCreateWithFlags(&s,cudaStreamNonBlocking));
  long long *moved=p; double t0=now(); long long m=0; while(!stop_mix){ CK(cudaMemcpyAsync(dev, h, 64<<20, cudaMemcpyHostToDevice, s)); CK(cudaStreamSynchronize(s)); m+=64<<20;} double t=now()-t0; printf("   mix h2d %.1f GB/s\n", m/t/1e9); *moved=m; return 0; }
int main(int argc,char**argv){
  if(argc<11){fprintf(stderr,"usage: file mode(pread|pipe|mix) threads chunkKiB buffers odirect requestMiB firstKiB willneed spin [pageable]\n");return 2;}
  path=argv[1]; mode=argv[2]; T=atoi(argv[3]); C=(size_t)atol(argv[4])<<10; B=atoi(argv[5]); odirect=atoi(argv[6]); R=atoll(argv[7])<<20; F0=(size_t)atol(argv[8])<<10; WN=atoi(argv[9]); SPIN=atoi(argv[10]); if(argc>11) pinned=0;
  char *sc=getenv("SCHED"); if(sc){ unsigned f = !strcmp(sc,"spin")? cudaDeviceScheduleSpin : !strcmp(sc,"yield")? cudaDeviceScheduleYield : cudaDeviceScheduleBlockingSync; CK(cudaSetDeviceFlags(f)); }
  fd_buf=open(path,O_RDONLY); fd_dir=open(path,O_RDONLY|O_DIRECT); size=lseek(fd_buf,0,SEEK_END); if(size<=0){fprintf(stderr,"no file %s\n",path);return 1;}
  CK(cudaSetDevice(0)); CK(cudaMalloc((void**)&dev, size));
  NB=T+1; pthread_barrier_init(&pbar,0,T+1); pthread_t th[256]; arg_t a[256];
  pthread_t mx; long long mixm=0; if(!strcmp(mode,"mix")){ stop_mix=0; pthread_create(&mx,0,mixcopy,&mixm); mode="pread"; }
  for(int i=0;i<T;i++){a[i].id=i; pthread_create(&th[i],0,worker,&a[i]);}
  CK(cudaEventCreate(&gref)); CK(cudaEventRecord(gref,0)); cref=now(); CK(cudaEventSynchronize(gref));
  bar_wait(); double t0=now(); Rstart[0]=t0;
  if(R){ int q=0; for(long long r=0;r<size;r+=R){ bar_wait(); if(++q<MAXR) Rstart[q]=now(); } }
  bar_wait(); double t=now()-t0;
  stop_mix=1; if(mixm>=0 && !strcmp(argv[2],"mix")) pthread_join(mx,0);
  for(int i=0;i<T;i++) pthread_join(th[i],0);
  printf("%-5s T=%-2d chunk=%-6zuKiB B=%d odirect=%d req=%lldMiB first=%zuKiB wn=%d %s: %.2f GB/s\n", argv[2], T, C>>10, B, odirect, R>>20, F0>>10, WN, pinned?"pinned":"pageable", size/t/1e9);
  if(R){ double nr=(double)((size+R-1)/R), P=0,E=0,S=0,Bw=0; for(int i=0;i<T;i++){P+=tp[i];E+=te[i];S+=ts[i];Bw+=tb[i];}
    { int nq=(int)nr; if(nq>MAXR-1) nq=MAXR-1; double a[6]={0}; int c=0;
      for(int q=2;q<nq;q++){ double t0q=Rstart[q], iss=1e9, pr=0, g0=1e9, g1=0, sy=0; for(int i=0;i<T;i++){ if(Rissue[i][q]<iss) iss=Rissue[i][q]; if(Rpread[i][q]>pr) pr=Rpread[i][q]; if(Rg0[i][q]<g0) g0=Rg0[i][q]; if(Rg1[i][q]>g1) g1=Rg1[i][q]; if(Rsync[i][q]>sy) sy=Rsync[i][q]; }
        a[0]+=iss-t0q; a[1]+=pr-t0q; a[2]+=g0-t0q; a[3]+=g1-t0q; a[4]+=sy-t0q; a[5]+=Rstart[q+1]-t0q; c++; }
      printf("      timeline (us from request start, avg of %d): first copy issued %.0f, last pread done %.0f, first copy done(gpu) %.0f, last copy done(gpu) %.0f, last sync returned %.0f, next request %.0f; dma %.1f GB/s\n", c, a[0]/c*1e6, a[1]/c*1e6, a[2]/c*1e6, a[3]/c*1e6, a[4]/c*1e6, a[5]/c*1e6, R/((a[3]-a[2])/c)/1e9); }
    printf("      per request: %.0f us wall; per thread avg: pread %.0f us, event wait %.0f us, stream sync %.0f us, barrier %.0f us (spin=%d sched=%s)\n", t/nr*1e6, P/T/nr*1e6, E/T/nr*1e6, S/T/nr*1e6, Bw/T/nr*1e6, SPIN, getenv("SCHED")?getenv("SCHED"):"auto"); }
  return 0;
}
