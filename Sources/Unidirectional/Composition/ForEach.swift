extension Reducer {
  /// Runs an element reducer on the element an action names, before this reducer.
  ///
  /// ```swift
  /// enum Action {
  ///   case rows(id: Row.State.ID, action: Row.Action)
  ///   var rows: (id: Row.State.ID, action: Row.Action)? {
  ///     get { if case .rows(let id, let action) = self { (id, action) } else { nil } }
  ///     set { if let newValue { self = .rows(id: newValue.id, action: newValue.action) } }
  ///   }
  /// }
  ///
  /// var body: some Reducer<State, Action> {
  ///   Reduce { state, action in ... }
  ///     .forEach(\.rows, action: \.rows) { Row() }
  /// }
  /// ```
  ///
  /// - An action for an id that is not in the collection is reported and ignored by the element
  ///   reducer.
  /// - Each element's effects are cancelled when it is removed.
  /// - Cancellation identifiers an element uses are scoped to it: two rows returning
  ///   `.cancel(id: Row.CancelID.timer)` never cancel each other's timers.
  @inlinable
  public func forEach<ElementState: Identifiable, ElementAction: Sendable, Element: Reducer>(
    _ state: WritableKeyPath<State, IdentifiedArrayOf<ElementState>>,
    action: WritableKeyPath<Action, (id: ElementState.ID, action: ElementAction)?>,
    @ReducerBuilder<ElementState, ElementAction> element: () -> Element,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) -> ForEachReducer<Self, Element>
  where
    Element.State == ElementState,
    Element.Action == ElementAction,
    ElementState.ID: Sendable
  {
    let path = Immutable(action)
    return ForEachReducer(
      parent: self,
      element: element(),
      state: state,
      extract: { $0[keyPath: path.value].map { ($0.id, $0.action) } },
      embed: { template, id, elementAction in
        var parent = template
        parent[keyPath: path.value] = (id, elementAction)
        return parent
      },
      location: SourceLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    )
  }

  /// `forEach(_:action:element:)` with a case path (``AnyCasePath``) for the
  /// `(id, action)` pair.
  @inlinable
  public func forEach<ElementState: Identifiable, ElementAction: Sendable, Element: Reducer>(
    _ state: WritableKeyPath<State, IdentifiedArrayOf<ElementState>>,
    action: AnyCasePath<Action, (ElementState.ID, ElementAction)>,
    @ReducerBuilder<ElementState, ElementAction> element: () -> Element,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
  ) -> ForEachReducer<Self, Element>
  where
    Element.State == ElementState,
    Element.Action == ElementAction,
    ElementState.ID: Sendable
  {
    ForEachReducer(
      parent: self,
      element: element(),
      state: state,
      extract: { action.extract(from: $0) },
      embed: { _, id, elementAction in action.embed((id, elementAction)) },
      location: SourceLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    )
  }
}

/// The reducer `forEach(_:action:element:)` returns (with a key path or a case path for the
/// element actions).
public struct ForEachReducer<Parent: Reducer, Element: Reducer>: Reducer
where Element.State: Identifiable, Element.State.ID: Sendable {
  @usableFromInline typealias ElementID = Element.State.ID

  @usableFromInline let parent: Parent
  @usableFromInline let element: Element
  @usableFromInline let state: WritableKeyPath<Parent.State, IdentifiedArrayOf<Element.State>>
  /// The element id and action a parent action carries, if any.
  @usableFromInline let extract: @Sendable (Parent.Action) -> (ElementID, Element.Action)?
  /// The parent action carrying an element action, written into the parent action that the
  /// element's effect answers (a key path needs a parent action to write into).
  @usableFromInline let embed: @Sendable (Parent.Action, ElementID, Element.Action) -> Parent.Action
  @usableFromInline let location: SourceLocation

  @usableFromInline
  init(
    parent: Parent,
    element: Element,
    state: WritableKeyPath<Parent.State, IdentifiedArrayOf<Element.State>>,
    extract: @escaping @Sendable (Parent.Action) -> (ElementID, Element.Action)?,
    embed: @escaping @Sendable (Parent.Action, ElementID, Element.Action) -> Parent.Action,
    location: SourceLocation
  ) {
    self.parent = parent
    self.element = element
    self.state = state
    self.extract = extract
    self.embed = embed
    self.location = location
  }

  // NB: inlinable, so a feature's forEach is specialized for it: unspecialized, an element's
  // action cost dozens of sends, most of it generic-metadata lookups (the tuple of id and
  // action, the effect's types) at every step.

  /// Runs the element reducer for element actions, then the parent reducer.
  @inlinable
  public func reduce(into state: inout Parent.State, action: Parent.Action) -> Effect<Parent.Action>
  {
    var elementEffect = Effect<Parent.Action>.none
    if let (id, elementAction) = self.extract(action) {
      if state[keyPath: self.state][id: id] != nil {
        let embed = self.embed
        let elementID = ElementCancelID(path: KeyPathID(self.state), id: id)
        let effect = withCancelScope(CancelKey(elementID)) {
          // swift-format-ignore: NeverForceUnwrap
          self.element.reduce(into: &state[keyPath: self.state][id: id]!, action: elementAction)
        }
        elementEffect = effect.map { embed(action, id, $0) }.cancellable(id: elementID)
      } else {
        self.reportMissingElement(id, elementAction)
      }
    }
    let idsBefore = state[keyPath: self.state].ids
    let parentEffect = self.parent.reduce(into: &state, action: action)
    let idsAfter = state[keyPath: self.state].ids
    guard idsBefore != idsAfter else {
      return elementEffect.merge(with: parentEffect)
    }
    let remaining = Set(idsAfter)
    let removed = idsBefore.filter { !remaining.contains($0) }
    guard !removed.isEmpty else { return elementEffect.merge(with: parentEffect) }
    let path = KeyPathID(self.state)
    return .merge(
      elementEffect,
      parentEffect,
      .cancel(ids: removed.map { ElementCancelID(path: path, id: $0) })
    )
  }

  @usableFromInline
  func reportMissingElement(_ id: ElementID, _ elementAction: Element.Action) {
    self.location.report(
      """
      A 'forEach' received an action for an element that is not in the collection.

        Id: \(id)
        Action: \(debugDescription(of: elementAction))

      The element reducer did not run. This usually means the action was sent after the \
      element was removed: its effects are cancelled on removal, so look for something else \
      sending to it.
      """
    )
  }
}
