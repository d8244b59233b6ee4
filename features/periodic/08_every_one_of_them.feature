@requires-periodic-tasks
Feature: Periodic 08 - Every one of them: the 5th notification's tasks over several databases of one instance

  The 5th notification's tasks name every database they apply to: the
  broker "scans all databases for which broker failed to start" and
  attempts to restart each, and it resumes the clean-up of acknowledged
  messages "of the databases that have any dialogs". Two such databases of
  one instance are served at the same notification, as one alone would be.

  @PER-5C
  Scenario: [1] Two databases whose broker failed to start both start at the 5th notification after their cause is fixed
    Given the topology:
      """
      instances:
        sql1:
          databases:
            vault: {master_key: false}
            safe: {master_key: false}
      """
    And time passes to second 1
    And CREATE MASTER KEY in database "vault" of "sql1"
    And CREATE MASTER KEY in database "safe" of "sql1"
    When time passes to second 30
    Then the log shows exactly from second 0.001:
      | second | event                   | database |
      | 25     | database broker started | vault    |
      | 25     | database broker started | safe     |

  @PER-5E
  Scenario: [2] The clean-ups of two databases of one instance that have dialogs are both resumed at the 5th notification
    Given the topology:
      """
      instances:
        sql1:
          databases:
            east:
              queues: {EastQueue: {}}
              services: {East: {queue: EastQueue}}
            west:
              queues: {WestQueue: {}}
              services: {West: {queue: WestQueue}}
      """
    And dialog "D1" is begun from service "East" to service "West"
    And dialog "D2" is begun from service "West" to service "East"
    And time passes to second 3
    And the acknowledged-message clean-up of database "east" on "sql1" stops
    And the acknowledged-message clean-up of database "west" on "sql1" stops
    When time passes to second 30
    Then the log shows exactly:
      | second | event               | database |
      | 25     | ack cleanup resumed | east     |
      | 25     | ack cleanup resumed | west     |

  # "of the databases that have any dialogs": a database without one is passed over, and the databases after it
  # are resumed all the same, whichever comes first in the instance (each of east and west begins a dialog: a
  # target's end is there only once a message has come)
  @PER-5E
  Scenario: [3] A database without dialogs, passed over, keeps none of the others from having its clean-up resumed
    Given the topology:
      """
      instances:
        sql1:
          databases:
            idle:
              queues: {IdleQueue: {}}
              services: {Idle: {queue: IdleQueue}}
            east:
              queues: {EastQueue: {}}
              services: {East: {queue: EastQueue}}
            west:
              queues: {WestQueue: {}}
              services: {West: {queue: WestQueue}}
      """
    And dialog "D1" is begun from service "East" to service "West"
    And dialog "D2" is begun from service "West" to service "East"
    And time passes to second 3
    And the acknowledged-message clean-up of database "idle" on "sql1" stops
    And the acknowledged-message clean-up of database "east" on "sql1" stops
    And the acknowledged-message clean-up of database "west" on "sql1" stops
    When time passes to second 30
    Then the log shows exactly:
      | second | event               | database |
      | 25     | ack cleanup resumed | east     |
      | 25     | ack cleanup resumed | west     |
