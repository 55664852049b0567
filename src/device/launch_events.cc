#include "src/device/launch_events.h"

namespace gyre {

bool observedEagerCall(const DeviceRequest& c) {
  if (!observedDeviceCalls(c.comm)) return false;
  bool capturing = false;
  return deviceRuntime()->isCapturing(c.stream, &capturing) == ncclSuccess && !capturing;
}

void* startDeviceCallEvent(const DeviceRequest& c, uint64_t seq, int nChannels, const char* algo,
                           const char* proto) {
  return stepev::startDeviceCall(c.comm->observer, c, seq, nChannels, algo, proto);
}

void LaunchEvents::begin(CommObserver* o, StreamHandle stream) {
  launchEvent_ = stepev::startKernelLaunch(o, stream);
  active_ = true;
}

void LaunchEvents::addChannels(CommObserver* o, void* callEvent, const int* channels, int n) {
  channels_ = stepev::startKernelChannels(o, callEvent, channels, n, channels_);
}

void LaunchEvents::launched(StreamHandle stream) {
  if (!active_) return;
  stepev::stopKernelLaunch(launchEvent_);
  if (channels_ && (!stream || deviceRuntime()->hostFunc(stream, stepev::kernelDone, channels_) != ncclSuccess))
    stepev::kernelDone(channels_);
  channels_ = nullptr;
  active_ = false;
}

}  // namespace gyre
