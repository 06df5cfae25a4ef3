import ServiceLifecycle
import Unidirectional

/// A registry runs as a service-lifecycle `Service`: it waits for the group's graceful shutdown,
/// then passivates every session (saving them, with storage) within its passivation grace period.
///
/// Put it *before* the HTTP server in the group's services, so that it shuts down after the
/// server has stopped taking requests (the group stops services last first):
///
/// ```swift
/// let app = Application(router: router, services: [carts])   // the server stops, then `carts`
/// ```
extension StoreRegistry: @retroactive Service {
  /// Waits for graceful shutdown (or cancellation), then shuts the registry down.
  public func run() async throws {
    try? await gracefulShutdown()
    await self.shutdown(gracePeriod: self.passivationGracePeriod)
  }
}

/// A ``StoreGroup`` as a service-lifecycle `Service`.
///
/// ```swift
/// let group = StoreGroup()
/// let services: [any Service] = [group.service(gracePeriod: .seconds(5)), server]
/// ```
public struct StoreGroupService: Service {
  /// The group.
  public let group: StoreGroup
  /// How long the stores' effects may run on at shutdown.
  public let gracePeriod: Duration

  /// Creates the service.
  public init(group: StoreGroup, gracePeriod: Duration = .seconds(10)) {
    self.group = group
    self.gracePeriod = gracePeriod
  }

  /// Waits for graceful shutdown (or cancellation), then shuts every store of the group down.
  public func run() async throws {
    try? await gracefulShutdown()
    _ = await self.group.shutdown(gracePeriod: self.gracePeriod)
  }
}

extension StoreGroup {
  /// This group as a service-lifecycle `Service` that shuts it down gracefully.
  public func service(gracePeriod: Duration = .seconds(10)) -> StoreGroupService {
    StoreGroupService(group: self, gracePeriod: gracePeriod)
  }
}
