// tickd::Store (include/tickd/store.h): lock::OpenBackend behind a shared handle.
#include "lib/store_impl.h"
#include "lock/registry.h"

namespace tickd {

Store::Store(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Expected<Store> Store::open(const std::string& url, const StoreOptions& options) {
  lock::BackendOptions bo;
  bo.backend = "";  // chosen by the URL's scheme
  bo.url = url;
  bo.username = options.username;
  bo.password = options.password;
  bo.tls.enabled = options.tls || !options.tls_ca_file.empty() || !options.tls_cert_file.empty();
  bo.tls.ca_file = options.tls_ca_file;
  bo.tls.cert_file = options.tls_cert_file;
  bo.tls.key_file = options.tls_key_file;
  bo.op_timeout = options.op_timeout;
  bo.retention = options.retention;
  auto impl = std::make_shared<Impl>();
  impl->own_clock = std::make_unique<RealClock>();
  impl->clock = impl->own_clock.get();
  impl->url = lock::RedactUrl(url);
  auto backend = lock::OpenBackend(bo, *impl->clock);
  if (!backend) return StoreError{backend.error().ToString()};
  impl->backend = std::move(*backend);
  return Store(std::move(impl));
}

std::string_view Store::backend() const { return impl_->backend->name(); }

std::vector<std::string> Store::warnings() const { return impl_->backend->StartupWarnings(); }

namespace lib {

Store MakeStore(std::unique_ptr<lock::Backend> backend, Clock& clock,
                std::chrono::milliseconds max_real_wait) {
  auto impl = std::make_shared<Store::Impl>();
  impl->clock = &clock;
  impl->backend = std::move(backend);
  impl->url = std::string(impl->backend->name()) + "://";
  impl->max_real_wait = max_real_wait;
  return Store(std::move(impl));
}

}  // namespace lib
}  // namespace tickd
