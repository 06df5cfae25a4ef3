import Foundation
import Testing
import Unidirectional
import UnidirectionalTesting

/// A user-defined dependency, the way `API.md` declares one.
private struct Greeter: Sendable {
  var greet: @Sendable (String) -> String
}

private enum GreeterKey: DependencyKey {
  static let liveValue = Greeter { "live \($0)" }
  static let testValue = Greeter { name in
    reportIssue("An unimplemented dependency was used: 'greeter'.")
    return "unimplemented \(name)"
  }
}

extension DependencyValues {
  fileprivate var greeter: Greeter {
    get { self[GreeterKey.self] }
    set { self[GreeterKey.self] = newValue }
  }
}

private struct Greeting: Reducer {
  struct State: Equatable, Sendable {
    var log: [String] = []
  }

  enum Action: Equatable, Sendable {
    case greet(String)
    case greetLater(String)
    case greeted(String)
    case makeID
    case madeID(UUID)
    case greetUnderOverride(String)
  }

  @Dependency(\.greeter) var greeter
  @Dependency(\.uuid) var uuid

  func reduce(into state: inout State, action: Action) -> Effect<Action> {
    switch action {
    case .greet(let name):
      state.log.append(self.greeter.greet(name))
      return .none
    case .greetLater(let name):
      // NB: the dependency is read inside the effect, after the reducer returned.
      return .run { send in
        @Dependency(\.greeter) var greeter
        await send(.greeted(greeter.greet(name)))
      }
    case .greeted(let greeting):
      state.log.append(greeting)
      return .none
    case .makeID:
      return .send(.madeID(self.uuid()))
    case .madeID(let id):
      state.log.append(id.uuidString)
      return .none
    case .greetUnderOverride(let name):
      // An effect that binds its own dependencies and feeds an action back under them.
      return .run { send in
        await withDependencies {
          $0.greeter = Greeter { "effect's \($0)" }
        } operation: {
          await send(.greet(name))
        }
      }
    }
  }
}

@Suite(.timeLimit(.minutes(2))) struct DependencyTests {
  @Test func aStoreUsesLiveValuesByDefault() async {
    let store = Store(initialState: Greeting.State()) { Greeting() }
    await store.send(.greet("Blob"))
    await store.send(.greetLater("Blob Jr")).finish()
    #expect(await store.state.log == ["live Blob", "live Blob Jr"])
  }

  @Test func overridesOfKeysSharingAValueTypeEachReadBackTheirOwnValue() {
    // Both clocks are `any Clock<Duration>`: each override is kept under its own key, and a key
    // not overridden keeps its default beside them.
    let testClock = TestClock()
    var values = DependencyValues()
    values.continuousClock = testClock
    values.suspendingClock = ImmediateClock()
    values.greeter = Greeter { "first \($0)" }
    values.greeter = Greeter { "second \($0)" }
    #expect((values.continuousClock as? TestClock) === testClock)
    #expect(values.suspendingClock is ImmediateClock)
    #expect(values.greeter.greet("Blob") == "second Blob")
    #expect(values.uuid() != values.uuid())
    #expect(DependencyValues().continuousClock is ContinuousClock)
  }

  @Test func storeOverridesReachTheReducerAndItsEffects() async {
    let store = Store(initialState: Greeting.State()) {
      Greeting()
    } withDependencies: {
      $0.greeter = Greeter { "mock \($0)" }
    }
    await store.send(.greet("Blob"))
    await store.send(.greetLater("Blob Jr")).finish()
    #expect(await store.state.log == ["mock Blob", "mock Blob Jr"])
  }

  @Test func effectsSeeTheDependenciesInForceWhenTheReducerReturnedThem() async {
    let store = Store(initialState: Greeting.State()) {
      Reduce<Greeting.State, Greeting.Action> { state, action in
        withDependencies {
          $0.greeter = Greeter { "scoped \($0)" }
        } operation: {
          Greeting().reduce(into: &state, action: action)
        }
      }
    }
    await store.send(.greetLater("Blob")).finish()
    #expect(await store.state.log == ["scoped Blob"])
  }

  @Test func withDependenciesScopesSynchronousAndAsynchronousWork() async {
    @Dependency(\.greeter) var greeter
    let inside = withDependencies {
      $0.greeter = Greeter { "sync \($0)" }
    } operation: {
      greeter.greet("a")
    }
    let insideAsync = await withDependencies {
      $0.greeter = Greeter { "async \($0)" }
    } operation: {
      await Task { @Sendable in "task" }.value + " " + greeter.greet("b")
    }
    #expect(inside == "sync a")
    #expect(insideAsync == "task async b")
    #expect(greeter.greet("c") == "live c")
  }

  @Test func aStoreWithDefaultDependenciesIgnoresTheSendersOverrides() async {
    let store = Store(initialState: Greeting.State()) { Greeting() }
    await withDependencies {
      $0.greeter = Greeter { "sender's \($0)" }
    } operation: {
      await store.send(.greet("Blob"))
      // The first effect starts the store's root task: it must not inherit the sender's either.
      await store.send(.greetLater("Blob Jr")).finish()
    }
    #expect(await store.state.log == ["live Blob", "live Blob Jr"])
  }

  @Test func actionsAnEffectFeedsBackAreReducedUnderTheStoresDependencies() async {
    let store = Store(initialState: Greeting.State()) {
      Greeting()
    } withDependencies: {
      $0.greeter = Greeter { "store's \($0)" }
    }
    await store.send(.greetUnderOverride("Blob")).finish()
    #expect(await store.state.log == ["store's Blob"])
  }

  @Test func theInitialStateAndTheReducerAreMadeUnderTheStoresDependencies() async {
    @Dependency(\.greeter) var greeter
    let store = Store(initialState: Greeting.State(log: [greeter.greet("initial")])) {
      let made = greeter.greet("builder")
      Reduce<Greeting.State, Greeting.Action> { state, _ in
        state.log.append(made)
        return .none
      }
    } withDependencies: {
      $0.greeter = Greeter { "store's \($0)" }
    }
    await store.send(.makeID)
    #expect(await store.state.log == ["store's initial", "store's builder"])
  }

  @Test func aTestStoreUsesTestValuesAndOverrides() async {
    let store = TestStore(initialState: Greeting.State()) {
      Greeting()
    } withDependencies: {
      $0.greeter = Greeter { "test \($0)" }
      $0.uuid = .incrementing
    }
    await store.send(.greet("Blob")) { $0.log = ["test Blob"] }
    await store.send(.makeID)
    await store.receive(.madeID(UUID(uuidString: "00000000-0000-0000-0000-000000000000")!)) {
      $0.log.append("00000000-0000-0000-0000-000000000000")
    }
  }

  @Test func anUnimplementedDependencyUsedUnderATestStoreIsReported() async {
    let (_, issues) = await collectingIssues {
      let store = TestStore(initialState: Greeting.State()) { Greeting() }
      await store.send(.greet("Blob")) { $0.log = ["unimplemented Blob"] }
      await store.send(.makeID)
      await store.receive(.madeID(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))) {
        $0.log.append("00000000-0000-0000-0000-000000000000")
      }
    }
    #expect(
      issues.map(\.message.firstLine) == [
        "An unimplemented dependency was used: 'greeter'.",
        "An unimplemented dependency was used: '\\.uuid'.",
      ]
    )
  }
}

extension String {
  fileprivate var firstLine: Substring {
    self.split(separator: "\n", maxSplits: 1).first ?? ""
  }
}
